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

// Format versions. Format 2 is format 1 plus encryption at rest with
// XChaCha20-Poly1305; format 3 is format 2 with XAES-256-GCM, the AEAD of
// new encrypted volumes. A plain volume is still written as format 1 and an
// XChaCha volume stays format 2, so an older agentfs keeps reading what it
// knows and refuses an XAES volume as too new (ErrFormatTooNew: "upgrade
// agentfs"), never as corrupt.
const (
	FormatPlain     = 1
	FormatEncrypted = 2
	FormatXAES      = 3
	// FormatVersion is the newest volume format this code reads and writes.
	FormatVersion = FormatXAES
)

// formatOf returns the format a volume encrypted with aead is written as,
// and the oldest format that may carry it.
func formatOf(aead string) int {
	switch aead {
	case EncryptionXAES:
		return FormatXAES
	case EncryptionXChaCha:
		return FormatEncrypted
	}
	return FormatPlain
}

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
	Hash        string    `json:"hash"`          // "sha256"; "hmac-sha256" (keyed) when encrypted
	Chunking    string    `json:"chunking"`      // "fixed"
	ChunkSize   int       `json:"chunk_size"`    // bytes per chunk (the last one of a file may be shorter)
	Compression string    `json:"compression"`   // "zstd"
	PackSize    int       `json:"pack_size"`     // target pack size in bytes
	Encryption  string    `json:"encryption"`    // "none", or the AEAD: "xaes-256-gcm" (format 3), "xchacha20-poly1305" (format 2)
	Key         *KeyWrap  `json:"key,omitempty"` // the wrapped volume key (encrypted volumes)
}

// NewConfig returns the parameters for a new plain volume (format 1), with
// a fresh volume ID and the given creation time.
func NewConfig(now time.Time) Config {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return Config{
		Format:      FormatPlain,
		VolumeID:    hex.EncodeToString(id[:]),
		Created:     now.UTC(),
		Hash:        "sha256",
		Chunking:    "fixed",
		ChunkSize:   DefaultChunkSize,
		Compression: "zstd",
		PackSize:    DefaultPackSize,
		Encryption:  EncryptionNone,
	}
}

// Validate checks that this code can read and write a volume with c.
func (c Config) Validate() error {
	switch {
	case c.Format > FormatVersion:
		return fmt.Errorf("volume format %d (this agentfs reads up to %d; upgrade agentfs): %w", c.Format, FormatVersion, ErrFormatTooNew)
	case c.Format < 1:
		return fmt.Errorf("volume format %d: %w", c.Format, ErrCorrupt)
	case c.Hash != map[bool]string{false: "sha256", true: "hmac-sha256"}[knownAEAD(c.Encryption)]:
		return fmt.Errorf("volume hash %q unsupported with encryption %q: %w", c.Hash, c.Encryption, ErrCorrupt)
	case c.Chunking != "fixed" || c.ChunkSize < 4096 || c.ChunkSize > 64<<20:
		return fmt.Errorf("volume chunking %q/%d unsupported: %w", c.Chunking, c.ChunkSize, ErrCorrupt)
	case c.Compression != "zstd":
		return fmt.Errorf("volume compression %q unsupported: %w", c.Compression, ErrCorrupt)
	case c.PackSize < 1<<20 || c.PackSize > 1<<30:
		return fmt.Errorf("volume pack size %d out of range: %w", c.PackSize, ErrCorrupt)
	case c.Encryption == EncryptionNone && c.Key != nil:
		return fmt.Errorf("plain volume with a key: %w", ErrCorrupt)
	case knownAEAD(c.Encryption) && c.Format < formatOf(c.Encryption):
		return fmt.Errorf("volume format %d cannot be encrypted with %s: %w", c.Format, c.Encryption, ErrCorrupt)
	case knownAEAD(c.Encryption):
		if err := c.Key.validate(); err != nil {
			return fmt.Errorf("volume key: %w", err)
		}
	case c.Encryption != EncryptionNone:
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
	store     *blobstore.Store
	cfg       Config // replaced only by RotateKey, before any concurrent use
	enc       *zstd.Encoder
	dec       *zstd.Decoder
	seal      *sealer // nil on a plain volume
	volKey    []byte  // the volume key of an encrypted volume
	emptyTree Hash    // HashOf(EmptyTree)
}

// Init creates a plain volume at store with cfg (use NewConfig; for an
// encrypted one, InitEncrypted). It fails with ErrVolumeExists if the store
// already holds one; two racing Inits produce exactly one volume.
func Init(ctx context.Context, store *blobstore.Store, cfg Config) (*Repo, error) {
	if cfg.Encryption != EncryptionNone {
		return nil, fmt.Errorf("init %s: use InitEncrypted for an encrypted volume", store.URL())
	}
	return initRepo(ctx, store, cfg, nil)
}

func initRepo(ctx context.Context, store *blobstore.Store, cfg Config, volKey []byte) (*Repo, error) {
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
	return newRepo(store, cfg, volKey)
}

// Open reads volume.json from store and opens a plain volume; an encrypted
// one gives a *KeyError matching ErrKeyRequired (use OpenWithKey).
func Open(ctx context.Context, store *blobstore.Store) (*Repo, error) {
	return OpenWithKey(ctx, store, nil)
}

// OpenWithKey reads volume.json from store. A store without one gives an
// error matching ErrNoVolume that says to run `agentfs init`; a newer format
// gives ErrFormatTooNew. For an encrypted volume it calls keys (never for a
// plain one): a nil keys or an error from it gives a *KeyError matching
// ErrKeyRequired, a key that does not unwrap the volume key one matching
// ErrWrongKey; both name the volume and what to pass.
func OpenWithKey(ctx context.Context, store *blobstore.Store, keys KeySource) (*Repo, error) {
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
	var vk []byte
	if cfg.Encryption != EncryptionNone {
		if vk, err = openKey(store.URL(), cfg, keys); err != nil {
			return nil, err
		}
	}
	return newRepo(store, cfg, vk)
}

func newRepo(store *blobstore.Store, cfg Config, volKey []byte) (*Repo, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	if err != nil {
		return nil, err
	}
	r := &Repo{store: store, cfg: cfg, enc: enc, dec: dec, volKey: volKey}
	if volKey != nil {
		if r.seal, err = newSealer(cfg.Encryption, volKey); err != nil {
			return nil, err
		}
	}
	r.emptyTree = r.HashOf(EmptyTree)
	return r, nil
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
