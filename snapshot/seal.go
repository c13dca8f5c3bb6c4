package snapshot

// Encryption at rest (FORMAT.md, "Encryption at rest"). An encrypted volume
// has a random 256-bit volume key, stored in volume.json wrapped by a key
// derived from what the user holds (a key, or a passphrase); `agentfs key
// rotate` rewraps it and rewrites nothing else. From the volume key come
// two subkeys (HKDF-SHA256): one seals every object the volume writes with
// the volume's AEAD (XAES-256-GCM; volumes made before it, with
// XChaCha20-Poly1305) under a fresh random 192-bit nonce and the object's
// key as associated data, the other names blobs by HMAC-SHA256 of their raw bytes,
// so that names leak nothing of the content and deduplication still works
// within the volume.
//
// Every read and write of a volume object goes through a Repo method of
// this file or pack.go (sealObject/openObject for whole objects, EncodeBlob
// and DecodeStored for blobs, PackWriter.Finish and the pack readers for
// footers); on a plain volume they pass the bytes through.

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"sync"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/xaes"
)

// Encryption values of Config.Encryption: the AEAD of an encrypted volume.
// InitEncrypted uses EncryptionXAES; volumes made with EncryptionXChaCha
// keep opening. Both take 24-byte random nonces and 16-byte tags.
const (
	EncryptionNone     = "none"
	EncryptionXAES     = "xaes-256-gcm"
	EncryptionXChaCha  = "xchacha20-poly1305"
	volumeKeySize      = 32
	saltSize           = 16
	sealNonceSize      = 24
	sealTagSize        = 16
	sealOverhead       = sealNonceSize + sealTagSize
	minUserKeySize     = 32
	kdfKey             = "hkdf-sha256"
	kdfPassphrase      = "argon2id"
	volumeKeyADPrefix  = "agentfs volume key\x00"
	blobADPrefix       = "agentfs blob\x00"
	footerADSuffix     = "#footer"
	objectKeyInfo      = "agentfs object encryption"
	nameKeyInfo        = "agentfs content names"
	userKeyInfo        = "agentfs user key"
	argonDefaultTime   = 3
	argonDefaultMemKiB = 64 << 10
	argonDefaultThread = 4
)

// Errors of encrypted volumes; check them with errors.Is.
var (
	// ErrKeyRequired: the volume is encrypted and no key was given. The
	// error is a *KeyError naming the volume and what to pass.
	ErrKeyRequired = errors.New("the volume is encrypted and no key was given")
	// ErrWrongKey: the key or passphrase given does not open the volume.
	// The error is a *KeyError.
	ErrWrongKey = errors.New("the key does not open this volume")
)

// randReader supplies volume keys, salts and nonces (tests make it
// deterministic to build golden files).
var randReader io.Reader = rand.Reader

// UserKey is what a user holds to open an encrypted volume: key material
// (the content of a key file or of AGENTFS_KEY, at least 32 bytes, used
// through HKDF-SHA256) or a passphrase (stretched with argon2id). Exactly
// one of the two is set.
type UserKey struct {
	Key        []byte
	Passphrase []byte
}

// IsPassphrase reports whether k is a passphrase.
func (k UserKey) IsPassphrase() bool { return k.Key == nil }

// KeySource supplies the user's key of an encrypted volume. Open calls it
// only for an encrypted volume, with passphrase telling whether the volume
// was locked with a passphrase (true) or a key (false), so a caller can
// prompt only when a prompt is useful. Its error is returned by Open,
// wrapped with the volume's URL.
type KeySource func(passphrase bool) (UserKey, error)

// KeyWrap is the "key" field of an encrypted volume's volume.json: the
// volume key wrapped by the user's key, and how to derive the latter.
type KeyWrap struct {
	KDF       string `json:"kdf"`                  // "hkdf-sha256" (a key) or "argon2id" (a passphrase)
	Salt      []byte `json:"salt"`                 // 16 random bytes
	Time      uint32 `json:"time,omitempty"`       // argon2id passes
	MemoryKiB uint32 `json:"memory_kib,omitempty"` // argon2id memory
	Threads   uint8  `json:"threads,omitempty"`    // argon2id lanes
	Wrapped   []byte `json:"wrapped"`              // nonce ‖ AEAD(KEK, volume key), the AEAD of the volume
}

// KeyError is returned, matching ErrKeyRequired or ErrWrongKey, when an
// encrypted volume cannot be opened with what was given.
type KeyError struct {
	URL        string // the volume's URL, without credentials
	Passphrase bool   // the volume is locked with a passphrase
	Err        error  // ErrKeyRequired or ErrWrongKey
	Cause      error  // what the KeySource said, if anything
}

func (e *KeyError) Error() string {
	what := "its key with --key-file FILE or in AGENTFS_KEY"
	if e.Passphrase {
		what = "its passphrase at the prompt or in AGENTFS_PASSPHRASE"
	}
	msg := fmt.Sprintf("volume %s is encrypted and no key was given: pass %s", e.URL, what)
	if errors.Is(e.Err, ErrWrongKey) {
		msg = fmt.Sprintf("volume %s: the key given does not open it (the volume is locked with %s): pass %s",
			e.URL, map[bool]string{true: "a passphrase", false: "a key"}[e.Passphrase], what)
	}
	if e.Cause != nil {
		msg += " (" + e.Cause.Error() + ")"
	}
	return msg
}

// Is matches e.Err.
func (e *KeyError) Is(target error) bool { return target == e.Err }

// Unwrap returns the KeySource's error, if any.
func (e *KeyError) Unwrap() error { return e.Cause }

// ArgonParams are the argon2id parameters a new passphrase wrap records.
// RFC 9106's second recommendation: 3 passes over 64 MiB with 4 lanes.
type ArgonParams struct {
	Time      uint32
	MemoryKiB uint32
	Threads   uint8
}

// DefaultArgon is what InitEncrypted and RotateKey use for a passphrase.
var DefaultArgon = ArgonParams{Time: argonDefaultTime, MemoryKiB: argonDefaultMemKiB, Threads: argonDefaultThread}

// kek derives the key-encryption key from k as w says.
func (w *KeyWrap) kek(k UserKey) ([]byte, error) {
	switch w.KDF {
	case kdfKey:
		if k.IsPassphrase() {
			return nil, ErrWrongKey
		}
		return hkdf.Key(sha256.New, k.Key, w.Salt, userKeyInfo, volumeKeySize)
	case kdfPassphrase:
		if !k.IsPassphrase() {
			return nil, ErrWrongKey
		}
		return argon2.IDKey(k.Passphrase, w.Salt, w.Time, w.MemoryKiB, w.Threads, volumeKeySize), nil
	}
	return nil, fmt.Errorf("key derivation %q unsupported: %w", w.KDF, ErrCorrupt)
}

// validate checks w's fields (not the key).
func (w *KeyWrap) validate() error {
	switch {
	case w == nil:
		return fmt.Errorf("encrypted volume without a key: %w", ErrCorrupt)
	case w.KDF != kdfKey && w.KDF != kdfPassphrase:
		return fmt.Errorf("key derivation %q unsupported: %w", w.KDF, ErrCorrupt)
	case len(w.Salt) < saltSize:
		return fmt.Errorf("key salt of %d bytes: %w", len(w.Salt), ErrCorrupt)
	case w.KDF == kdfPassphrase && (w.Time < 1 || w.Time > 100 || w.MemoryKiB < 8*uint32(w.Threads) || w.MemoryKiB > 4<<20 || w.Threads < 1):
		return fmt.Errorf("argon2id parameters t=%d m=%d p=%d out of range: %w", w.Time, w.MemoryKiB, w.Threads, ErrCorrupt)
	case len(w.Wrapped) != sealOverhead+volumeKeySize:
		return fmt.Errorf("wrapped key of %d bytes: %w", len(w.Wrapped), ErrCorrupt)
	}
	return nil
}

// wrapKey wraps volKey for volume id under k with AEAD aead, with argon for
// a passphrase.
func wrapKey(volKey []byte, id, aead string, k UserKey, argon ArgonParams) (*KeyWrap, error) {
	if err := k.check(); err != nil {
		return nil, err
	}
	w := &KeyWrap{KDF: kdfKey, Salt: make([]byte, saltSize)}
	if k.IsPassphrase() {
		w.KDF, w.Time, w.MemoryKiB, w.Threads = kdfPassphrase, argon.Time, argon.MemoryKiB, argon.Threads
	}
	if _, err := io.ReadFull(randReader, w.Salt); err != nil {
		return nil, err
	}
	kek, err := w.kek(k)
	if err != nil {
		return nil, err
	}
	s, err := newAEAD(aead, kek)
	if err != nil {
		return nil, err
	}
	w.Wrapped = seal(s, nil, volKey, []byte(volumeKeyADPrefix+id))
	return w, nil
}

// unwrapKey returns the volume key w wraps for volume id with AEAD aead,
// or ErrWrongKey.
func (w *KeyWrap) unwrapKey(id, aead string, k UserKey) ([]byte, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	kek, err := w.kek(k)
	if err != nil {
		return nil, err
	}
	s, err := newAEAD(aead, kek)
	if err != nil {
		return nil, err
	}
	vk, err := s.Open(nil, w.Wrapped[:sealNonceSize], w.Wrapped[sealNonceSize:], []byte(volumeKeyADPrefix+id))
	if err != nil {
		return nil, ErrWrongKey
	}
	return vk, nil
}

// check rejects an empty passphrase and short key material.
func (k UserKey) check() error {
	switch {
	case k.Key != nil && k.Passphrase != nil:
		return errors.New("give a key or a passphrase, not both")
	case k.IsPassphrase() && len(k.Passphrase) == 0:
		return errors.New("the passphrase is empty")
	case !k.IsPassphrase() && len(k.Key) < minUserKeySize:
		return fmt.Errorf("a key must hold at least %d bytes (for example `openssl rand -base64 32`); it has %d: "+
			"for something shorter, use a passphrase (AGENTFS_PASSPHRASE), which is stretched with argon2id", minUserKeySize, len(k.Key))
	}
	return nil
}

// knownAEAD reports whether name is an AEAD this code seals and opens with.
func knownAEAD(name string) bool { return name == EncryptionXAES || name == EncryptionXChaCha }

// newAEAD returns the AEAD called name under key.
func newAEAD(name string, key []byte) (cipher.AEAD, error) {
	switch name {
	case EncryptionXAES:
		return xaes.New(key)
	case EncryptionXChaCha:
		return chacha20poly1305.NewX(key)
	}
	return nil, fmt.Errorf("volume encryption %q unsupported: %w", name, ErrCorrupt)
}

// seal appends a fresh nonce and the sealed plain to dst.
func seal(a cipher.AEAD, dst, plain, ad []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, sealNonceSize)...)
	newNonce(dst[n:])
	return a.Seal(dst, dst[n:], plain, ad)
}

// sealInPlace seals buf[sealNonceSize:] where it lies: a fresh nonce goes
// into buf[:sealNonceSize] and the tag after the ciphertext, without a
// copy when buf has sealTagSize bytes of spare capacity. EncodeBlob uses
// it so that sealing a 4 MiB chunk allocates and copies nothing.
func sealInPlace(a cipher.AEAD, buf, ad []byte) []byte {
	nonce := buf[:sealNonceSize]
	newNonce(nonce)
	return a.Seal(buf[:sealNonceSize], nonce, buf[sealNonceSize:], ad)
}

// newNonce fills nonce with random bytes.
func newNonce(nonce []byte) {
	if _, err := io.ReadFull(randReader, nonce); err != nil {
		panic(fmt.Sprintf("agentfs: no randomness for a nonce: %v", err)) // crypto/rand never fails on Linux
	}
}

// sealer holds the subkeys of an encrypted volume.
type sealer struct {
	aead    cipher.AEAD // objects
	nameKey []byte      // HMAC-SHA256 key of blob names
	// names pools HMAC-SHA256 states under nameKey: a reset one starts
	// from the keyed inner state it saved, where hmac.New hashes the key
	// pads again and allocates (about 2 % of a checkpoint of 10,000 small
	// files, BENCHMARKS.md).
	names sync.Pool
}

func newSealer(aead string, volKey []byte) (*sealer, error) {
	ek, err := hkdf.Key(sha256.New, volKey, nil, objectKeyInfo, volumeKeySize)
	if err != nil {
		return nil, err
	}
	nk, err := hkdf.Key(sha256.New, volKey, nil, nameKeyInfo, volumeKeySize)
	if err != nil {
		return nil, err
	}
	a, err := newAEAD(aead, ek)
	if err != nil {
		return nil, err
	}
	sl := &sealer{aead: a, nameKey: nk}
	sl.names.New = func() any { return hmac.New(sha256.New, nk) }
	return sl, nil
}

// open authenticates and decrypts sealed with associated data ad. Anything
// that fails — tampered bytes, an object moved to another key, an object
// of another volume — is ErrCorrupt, like a blob that does not match its
// hash.
func (s *sealer) open(what string, sealed, ad []byte) ([]byte, error) {
	if len(sealed) < sealOverhead {
		return nil, fmt.Errorf("%s: sealed object of %d bytes is too short: %w", what, len(sealed), ErrCorrupt)
	}
	out, err := s.aead.Open(nil, sealed[:sealNonceSize], sealed[sealNonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("%s: does not authenticate (tampered, or not written under this key and name): %w", what, ErrCorrupt)
	}
	return out, nil
}

// Encrypted reports whether the volume is encrypted.
func (r *Repo) Encrypted() bool { return r.seal != nil }

// HashOf returns the name of a blob with raw bytes b in this volume: the
// SHA-256 of b on a plain volume, the HMAC-SHA256 of b under the volume's
// name key on an encrypted one. Safe for concurrent use.
func (r *Repo) HashOf(b []byte) Hash {
	if r.seal == nil {
		return HashOf(b)
	}
	m := r.seal.names.Get().(hash.Hash)
	m.Reset()
	m.Write(b)
	var h Hash
	m.Sum(h[:0])
	r.seal.names.Put(m)
	return h
}

// EmptyTreeHash returns r.HashOf(EmptyTree), computed once.
func (r *Repo) EmptyTreeHash() Hash { return r.emptyTree }

// sealObject returns what to store under key for an object whose content
// is plain: plain itself on a plain volume.
func (r *Repo) sealObject(key string, plain []byte) []byte {
	if r.seal == nil {
		return plain
	}
	return seal(r.seal.aead, make([]byte, 0, len(plain)+sealOverhead), plain, []byte(key))
}

// openObject returns the content of the object stored under key as b.
func (r *Repo) openObject(key string, b []byte) ([]byte, error) {
	if r.seal == nil {
		return b, nil
	}
	return r.seal.open(key, b, []byte(key))
}

// getObject reads and opens the object at key. Store errors (not found
// included) are returned as the store gave them.
func (r *Repo) getObject(ctx context.Context, key string) ([]byte, error) {
	b, err := r.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return r.openObject(key, b)
}

// putObject seals plain and stores it at key.
func (r *Repo) putObject(ctx context.Context, key string, plain []byte) error {
	return r.store.Put(ctx, key, r.sealObject(key, plain))
}

// putObjectIfAbsent seals plain and creates key with it (blobstore.ErrExists
// if it exists).
func (r *Repo) putObjectIfAbsent(ctx context.Context, key string, plain []byte) error {
	return r.store.PutIfAbsent(ctx, key, r.sealObject(key, plain))
}

// blobAD is the associated data of a blob: its name.
func blobAD(h Hash) []byte { return append([]byte(blobADPrefix), h[:]...) }

// footerAD is the associated data of pack id's footer.
func footerAD(id PackID) []byte { return []byte(PackKey(id) + footerADSuffix) }

// InitEncrypted creates an encrypted volume at store with cfg (use
// NewConfig; its format and encryption are set here: XAES-256-GCM, format
// 3), a
// fresh random volume key wrapped under key (argon2id with DefaultArgon
// for a passphrase). It fails like Init.
func InitEncrypted(ctx context.Context, store *blobstore.Store, cfg Config, key UserKey) (*Repo, error) {
	return initEncrypted(ctx, store, cfg, key, EncryptionXAES)
}

// initEncrypted is InitEncrypted with the AEAD called aead (tests make
// volumes of EncryptionXChaCha with it, as older agentfs did).
func initEncrypted(ctx context.Context, store *blobstore.Store, cfg Config, key UserKey, aead string) (*Repo, error) {
	vk := make([]byte, volumeKeySize)
	if _, err := io.ReadFull(randReader, vk); err != nil {
		return nil, err
	}
	w, err := wrapKey(vk, cfg.VolumeID, aead, key, DefaultArgon)
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", store.URL(), err)
	}
	cfg.Format, cfg.Encryption, cfg.Hash, cfg.Key = formatOf(aead), aead, "hmac-sha256", w
	return initRepo(ctx, store, cfg, vk)
}

// RotateKey rewraps the volume key under newKey and rewrites volume.json;
// nothing else changes, and the old key no longer opens the volume. It
// fails on a plain volume, and with an error matching ErrVolumeChanged if
// the store no longer holds r's volume. Two racing rotations: the last
// write wins, and each caller's new key opens the volume until then.
func (r *Repo) RotateKey(ctx context.Context, newKey UserKey) error {
	if r.seal == nil {
		return fmt.Errorf("volume %s is not encrypted: there is no key to rotate", r.URL())
	}
	if err := r.CheckVolume(ctx); err != nil {
		return fmt.Errorf("rotate the key of %s: %w", r.URL(), err)
	}
	w, err := wrapKey(r.volKey, r.cfg.VolumeID, r.cfg.Encryption, newKey, DefaultArgon)
	if err != nil {
		return fmt.Errorf("rotate the key of %s: %w", r.URL(), err)
	}
	cfg := r.cfg
	cfg.Key = w
	if err := r.store.Put(ctx, VolumeKey, cfg.Encode()); err != nil {
		return fmt.Errorf("rotate the key of %s: %w", r.URL(), err)
	}
	return nil
}

// openKey unwraps the volume key of cfg with what keys supplies.
func openKey(url string, cfg Config, keys KeySource) ([]byte, error) {
	pass := cfg.Key != nil && cfg.Key.KDF == kdfPassphrase
	if keys == nil {
		return nil, &KeyError{URL: url, Passphrase: pass, Err: ErrKeyRequired}
	}
	k, err := keys(pass)
	if err != nil {
		return nil, &KeyError{URL: url, Passphrase: pass, Err: ErrKeyRequired, Cause: err}
	}
	vk, err := cfg.Key.unwrapKey(cfg.VolumeID, cfg.Encryption, k)
	if errors.Is(err, ErrWrongKey) {
		return nil, &KeyError{URL: url, Passphrase: pass, Err: ErrWrongKey}
	}
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", url, err)
	}
	return vk, nil
}
