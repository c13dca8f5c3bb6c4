// Package xaes implements XAES-256-GCM (https://c2sp.org/XAES-256-GCM), an
// AEAD with a 256-bit key and 192-bit nonces that can be drawn at random for
// a virtually unlimited number of messages under one key (2⁸⁰ messages for a
// collision risk of 2⁻³²), at the speed of AES-256-GCM.
//
// Each message is sealed with AES-256-GCM under a subkey derived from the
// key and the first 12 bytes of the nonce (the NIST SP 800-108r1 counter KDF
// with AES-256-CMAC, label "X"), with the last 12 bytes as the GCM nonce.
// The Go standard library implements it internally but does not export it;
// this is written from the C2SP specification and checked against its test
// vectors. Like AES-256-GCM, it is neither nonce-misuse resistant nor
// key-committing.
package xaes

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
)

// Sizes of XAES-256-GCM.
const (
	KeySize   = 32
	NonceSize = 24
	Overhead  = 16 // the GCM tag
)

type xaes struct {
	c  cipher.Block // AES-256 under the key: the CMAC of the key derivation
	k1 [aes.BlockSize]byte
}

// New returns XAES-256-GCM under key, which must be KeySize bytes. The
// AEAD is safe for concurrent use; Seal and Open panic on a nonce that is
// not NonceSize bytes long, like the standard library's AEADs.
func New(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, errors.New("xaes: the key must be 32 bytes")
	}
	c, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	x := &xaes{c: c}
	// The CMAC subkey K1 (SP 800-38B, 6.1): L = AES(0), K1 = L << 1, and
	// if L's top bit was set, K1 ^= 0x87 (R128) in the last byte. The
	// CMAC input is always one complete block, so K2 is never needed.
	var l [aes.BlockSize]byte
	c.Encrypt(l[:], l[:])
	for i := range aes.BlockSize - 1 {
		x.k1[i] = l[i]<<1 | l[i+1]>>7
	}
	x.k1[aes.BlockSize-1] = l[aes.BlockSize-1] << 1
	if l[0]&0x80 != 0 {
		x.k1[aes.BlockSize-1] ^= 0x87
	}
	return x, nil
}

func (*xaes) NonceSize() int { return NonceSize }
func (*xaes) Overhead() int  { return Overhead }

// gcm returns AES-256-GCM under the subkey of nonce.
func (x *xaes) gcm(nonce []byte) cipher.AEAD {
	if len(nonce) != NonceSize {
		panic("xaes: incorrect nonce length given to XAES-256-GCM")
	}
	key := x.subkey(nonce)
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err) // the standard 12-byte nonce and 16-byte tag
	}
	return g
}

// subkey derives the AES-256-GCM key of nonce's first half: the two CMAC
// blocks (counter i = 1, 2; label "X"; no L field) of
// M_i = 0x00 ‖ i ‖ 0x58 ‖ 0x00 ‖ nonce[:12], each one block XORed with K1.
func (x *xaes) subkey(nonce []byte) [KeySize]byte {
	var key [KeySize]byte
	for i := range 2 {
		m := key[i*aes.BlockSize : (i+1)*aes.BlockSize]
		m[1], m[2] = byte(i+1), 'X'
		copy(m[4:], nonce[:12])
		for j := range m {
			m[j] ^= x.k1[j]
		}
		x.c.Encrypt(m, m)
	}
	return key
}

// Seal encrypts and authenticates plaintext and additionalData under
// nonce and appends the result to dst (see cipher.AEAD).
func (x *xaes) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	return x.gcm(nonce).Seal(dst, nonce[12:], plaintext, additionalData)
}

// Open authenticates and decrypts ciphertext and additionalData under
// nonce and appends the plaintext to dst (see cipher.AEAD).
func (x *xaes) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	return x.gcm(nonce).Open(dst, nonce[12:], ciphertext, additionalData)
}
