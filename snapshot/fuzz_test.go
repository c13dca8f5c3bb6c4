package snapshot

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/binenc"
)

// Every decoder of an on-blob object is fuzzed: it must never panic, and
// what it accepts must re-encode to the same bytes.

func FuzzDecodeTree(f *testing.F) {
	b, _ := EncodeTree(sampleEntries())
	f.Add(b)
	f.Add(EmptyTree)
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := DecodeTree(data)
		if err != nil {
			return
		}
		again, err := EncodeTree(entries)
		if err != nil {
			t.Fatalf("decoded tree does not re-encode: %v", err)
		}
		if _, err := DecodeTree(again); err != nil {
			t.Fatalf("re-encoded tree does not decode: %v", err)
		}
	})
}

func FuzzParsePack(f *testing.F) {
	r := &Repo{}
	w := r.NewPackWriter()
	w.Add(EncodedBlob{Type: BlobData, Hash: HashOf([]byte("x")), RawLen: 1, Stored: []byte{0, 'x'}})
	f.Add(w.Finish())
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParsePack(data)
		if err != nil {
			return
		}
		footer := encodePackFooter(entries)
		if !bytes.Contains(data, footer) {
			t.Fatalf("accepted footer does not re-encode")
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	f.Add(EncodeCommit(Commit{ID: CommitID{"main", 1}, Root: RootDir{Tree: fixedRef(1)}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommit(data)
		if err != nil {
			return
		}
		if _, err := DecodeCommit(EncodeCommit(c)); err != nil {
			t.Fatalf("re-encoded commit does not decode: %v", err)
		}
	})
}

func FuzzDecodeConfig(f *testing.F) {
	f.Add(NewConfig(time.Unix(1700000000, 0)).Encode())
	for _, dir := range []string{"encrypted", "encrypted-xchacha"} {
		if b, err := os.ReadFile("testdata/" + dir + "/volume.json"); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeConfig(data)
		if err != nil {
			return
		}
		if _, err := DecodeConfig(c.Encode()); err != nil {
			t.Fatalf("re-encoded config does not decode: %v", err)
		}
	})
}

func FuzzParseBlobRef(f *testing.F) {
	f.Add(fixedRef(1).String())
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseBlobRef(s)
		if err != nil {
			return
		}
		if r2, err := ParseBlobRef(r.String()); err != nil || r2 != r {
			t.Fatalf("round trip of %q: %v", s, err)
		}
	})
}

func FuzzDecodeRef(f *testing.F) {
	f.Add(EncodeRef(nil, fixedRef(2)))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := binenc.Decoder{B: data}
		r := DecodeRef(&d)
		if d.Err() != nil {
			return
		}
		d2 := binenc.Decoder{B: EncodeRef(nil, r)}
		if r2 := DecodeRef(&d2); d2.Err() != nil || r2 != r {
			t.Fatalf("ref does not round-trip: %v", d2.Err())
		}
	})
}
