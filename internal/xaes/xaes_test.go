package xaes

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha3"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/agentfs/agentfs/internal/testenv"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVectors: the two vectors of the C2SP specification, with their
// intermediate values (L's top bit clear in the first, set in the second).
func TestVectors(t *testing.T) {
	for _, v := range []struct{ key, l, k1, kx, aad, sealed string }{
		{key: "0101010101010101010101010101010101010101010101010101010101010101",
			l: "7298caa565031eadc6ce23d23ea66378", k1: "e531954aca063d5b8d9c47a47d4cc6f0",
			kx:     "c8612c9ed53fe43e8e005b828a1631a0bbcb6ab2f46514ec4f439fcfd0fa969b",
			sealed: "ce546ef63c9cc60765923609b33a9a1974e96e52daf2fcf7075e2271"},
		{key: "0303030303030303030303030303030303030303030303030303030303030303",
			l: "91c08762876dccf9ba204a33768fa5fe", k1: "23810ec50edb99f374409466ed1f4b7b",
			kx:  "e9c621d4cdd9b11b00a6427ad7e559aeedd66b3857646677748f8ca796cb3fd8",
			aad: "c2sp.org/XAES-256-GCM", sealed: "986ec1832593df5443a179437fd083bf3fdb41abd740a21f71eb769d"},
	} {
		nonce, plain := []byte("ABCDEFGHIJKLMNOPQRSTUVWX"), []byte("XAES-256-GCM")
		a, err := New(unhex(t, v.key))
		if err != nil {
			t.Fatal(err)
		}
		x := a.(*xaes)
		var l [aes.BlockSize]byte
		x.c.Encrypt(l[:], l[:])
		kx := x.subkey(nonce)
		if hex.EncodeToString(l[:]) != v.l || hex.EncodeToString(x.k1[:]) != v.k1 || hex.EncodeToString(kx[:]) != v.kx {
			t.Errorf("key %s: L %x K1 %x Kx %x", v.key[:2], l, x.k1, kx)
		}
		sealed := a.Seal(nil, nonce, plain, []byte(v.aad))
		if hex.EncodeToString(sealed) != v.sealed {
			t.Errorf("key %s: sealed %x, want %s", v.key[:2], sealed, v.sealed)
		}
		if got, err := a.Open(nil, nonce, sealed, []byte(v.aad)); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("key %s: Open = %q, %v", v.key[:2], got, err)
		}
		sealed[0] ^= 1
		if _, err := a.Open(nil, nonce, sealed, []byte(v.aad)); err == nil {
			t.Errorf("key %s: a changed byte opened", v.key[:2])
		}
	}
}

// TestAccumulated: the specification's accumulated randomized test — keys,
// nonces, plaintexts and additional data of 0–255 bytes from one SHAKE-128
// stream, every ciphertext hashed by another — 10,000 iterations, and the
// 1,000,000 of the specification with AGENTFS_XAES_MILLION=1 (about 10 s of
// CPU without -race, several times that with it).
func TestAccumulated(t *testing.T) {
	runs := map[int]string{10_000: "e6b9edf2df6cec60c8cbd864e2211b597fb69a529160cd040d56c0c210081939"}
	if os.Getenv("AGENTFS_XAES_MILLION") == "1" {
		runs[1_000_000] = "2163ae1445985a30b60585ee67daa55674df06901b890593e824b8a7c885ab15"
	}
	for n, want := range runs {
		s, d := sha3.NewSHAKE128(), sha3.NewSHAKE128()
		key, nonce, lenb := make([]byte, KeySize), make([]byte, NonceSize), make([]byte, 1)
		for range n {
			_, _ = s.Read(key)
			_, _ = s.Read(nonce)
			_, _ = s.Read(lenb)
			plain := make([]byte, lenb[0])
			_, _ = s.Read(plain)
			_, _ = s.Read(lenb)
			aad := make([]byte, lenb[0])
			_, _ = s.Read(aad)
			a, err := New(key)
			if err != nil {
				t.Fatal(err)
			}
			sealed := a.Seal(nil, nonce, plain, aad)
			if got, err := a.Open(nil, nonce, sealed, aad); err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("round trip: %v", err)
			}
			_, _ = d.Write(sealed)
		}
		sum := make([]byte, 32)
		_, _ = d.Read(sum)
		if got := hex.EncodeToString(sum); got != want {
			t.Errorf("%d iterations: hash %s, want %s", n, got, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := New(make([]byte, 16)); err == nil {
		t.Error("accepted a 16-byte key")
	}
	a, _ := New(make([]byte, KeySize))
	defer func() {
		if recover() == nil {
			t.Error("a 12-byte nonce did not panic")
		}
	}()
	a.Seal(nil, make([]byte, 12), nil, nil)
}

// BenchmarkSeal compares the AEADs agentfs could seal objects with: a
// 4 MiB chunk and a 4 KiB file, each sealed under a fresh nonce (AES-256-GCM
// with random 96-bit nonces only as the speed of reference: it is not safe
// for a volume's unbounded number of objects). Run with GOMAXPROCS=1 and
// compare cpu-ns/op.
func BenchmarkSeal(b *testing.B) {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key)
	xa, _ := New(key)
	xc, _ := chacha20poly1305.NewX(key)
	blk, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(blk)
	for _, size := range []int{4 << 20, 4 << 10} {
		plain := make([]byte, size)
		_, _ = rand.Read(plain)
		for _, c := range []struct {
			name string
			a    cipher.AEAD
		}{{"xaes-256-gcm", xa}, {"xchacha20-poly1305", xc}, {"aes-256-gcm", gcm}} {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				b.SetBytes(int64(size))
				nonce := make([]byte, c.a.NonceSize())
				out := make([]byte, 0, size+c.a.Overhead())
				c0 := testenv.CPUTime()
				for b.Loop() {
					_, _ = rand.Read(nonce)
					out = c.a.Seal(out[:0], nonce, plain, nil)
				}
				b.ReportMetric(float64(testenv.CPUTime()-c0)/float64(b.N), "cpu-ns/op") // steadier than wall time on a loaded machine
			})
		}
	}
}
