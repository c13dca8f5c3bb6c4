package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/klauspost/compress/zstd"
)

// FormatVersion is the newest volume format this code reads and writes.
const FormatVersion = 1

// VolumeKey is the store key of the volume descriptor.
const VolumeKey = "volume.json"

// Defaults for a new volume.
const (
	DefaultChunkSize = 4 << 20  // fixed-size file chunks
	DefaultPackSize  = 16 << 20 // target size of a pack
	DefaultBranch    = "main"
)

// Config is the content of volume.json: the format version and the
// parameters every writer of the volume must use.
type Config struct {
	Format      int       `json:"format"`
	VolumeID    string    `json:"volume_id"`
	Created     time.Time `json:"created"`
	Hash        string    `json:"hash"`        // "sha256"
	Chunking    string    `json:"chunking"`    // "fixed"
	ChunkSize   int       `json:"chunk_size"`  // bytes per chunk (the last one of a file may be shorter)
	Compression string    `json:"compression"` // "zstd"
	PackSize    int       `json:"pack_size"`   // target pack size in bytes
	Encryption  string    `json:"encryption"`  // "none" (the only value format 1 defines)
}

// NewConfig returns the parameters for a new volume, with a fresh volume ID
// and the given creation time.
func NewConfig(now time.Time) Config {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return Config{
		Format:      FormatVersion,
		VolumeID:    hex.EncodeToString(id[:]),
		Created:     now.UTC(),
		Hash:        "sha256",
		Chunking:    "fixed",
		ChunkSize:   DefaultChunkSize,
		Compression: "zstd",
		PackSize:    DefaultPackSize,
		Encryption:  "none",
	}
}

// Validate checks that this code can read and write a volume with c.
func (c Config) Validate() error {
	switch {
	case c.Format > FormatVersion:
		return fmt.Errorf("volume format %d (this agentfs reads up to %d; upgrade agentfs): %w", c.Format, FormatVersion, ErrFormatTooNew)
	case c.Format < 1:
		return fmt.Errorf("volume format %d: %w", c.Format, ErrCorrupt)
	case c.Hash != "sha256":
		return fmt.Errorf("volume hash %q unsupported: %w", c.Hash, ErrCorrupt)
	case c.Chunking != "fixed" || c.ChunkSize < 4096 || c.ChunkSize > 64<<20:
		return fmt.Errorf("volume chunking %q/%d unsupported: %w", c.Chunking, c.ChunkSize, ErrCorrupt)
	case c.Compression != "zstd":
		return fmt.Errorf("volume compression %q unsupported: %w", c.Compression, ErrCorrupt)
	case c.PackSize < 1<<20 || c.PackSize > 1<<30:
		return fmt.Errorf("volume pack size %d out of range: %w", c.PackSize, ErrCorrupt)
	case c.Encryption != "none":
		return fmt.Errorf("volume encryption %q unsupported: %w", c.Encryption, ErrCorrupt)
	case c.VolumeID == "":
		return fmt.Errorf("volume id missing: %w", ErrCorrupt)
	}
	return nil
}

// DecodeConfig parses volume.json.
func DecodeConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("volume.json: %w: %w", ErrCorrupt, err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("volume.json: %w", err)
	}
	return c, nil
}

// Encode returns the JSON form of c.
func (c Config) Encode() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

// Repo is an opened volume: its parameters and the store that holds it. It is
// safe for concurrent use.
type Repo struct {
	store *blobstore.Store
	cfg   Config
	enc   *zstd.Encoder
	dec   *zstd.Decoder
}

// Init creates a volume at store with cfg (use NewConfig). It fails with
// ErrVolumeExists if the store already holds one; two racing Inits produce
// exactly one volume.
func Init(ctx context.Context, store *blobstore.Store, cfg Config) (*Repo, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	err := store.PutIfAbsent(ctx, VolumeKey, cfg.Encode())
	if errors.Is(err, blobstore.ErrExists) {
		return nil, fmt.Errorf("init %s: %w", store.URL(), ErrVolumeExists)
	}
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", store.URL(), err)
	}
	return newRepo(store, cfg)
}

// Open reads volume.json from store. A store without one gives an error
// matching ErrNoVolume that says to run `agentfs init`; a newer format gives
// ErrFormatTooNew.
func Open(ctx context.Context, store *blobstore.Store) (*Repo, error) {
	b, err := store.Get(ctx, VolumeKey)
	if errors.Is(err, blobstore.ErrNotFound) {
		return nil, fmt.Errorf("%s: %w (create one with `agentfs init %s`)", store.URL(), ErrNoVolume, store.URL())
	}
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", store.URL(), err)
	}
	cfg, err := DecodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", store.URL(), err)
	}
	return newRepo(store, cfg)
}

func newRepo(store *blobstore.Store, cfg Config) (*Repo, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, err
	}
	return &Repo{store: store, cfg: cfg, enc: enc, dec: dec}, nil
}

// Config returns the volume's parameters.
func (r *Repo) Config() Config { return r.cfg }

// Store returns the store holding the volume.
func (r *Repo) Store() *blobstore.Store { return r.store }

// URL returns the volume's store URL.
func (r *Repo) URL() string { return r.store.URL() }

// Close releases the codecs (not the store).
func (r *Repo) Close() {
	r.dec.Close()
}

// UploadGrace is how long an uploaded pack may stay unreferenced by any
// commit before gc may delete it. A writer whose checkpoint takes longer
// than half of it checks that its packs still exist before committing.
const UploadGrace = time.Hour
