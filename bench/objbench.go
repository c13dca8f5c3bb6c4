package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
)

// ObjReportSchema is the version of the JSON report of `agentfs objbench`;
// it changes when a field changes meaning or goes away.
const ObjReportSchema = 1

// VolumeKey is the key that marks the root of an agentfs volume; objbench
// refuses to run on a store whose root holds it.
const VolumeKey = "volume.json"

// ErrVolume is matched (errors.Is) by the error RunObj returns when the
// store's root holds an agentfs volume.
var ErrVolume = errors.New("the store holds an agentfs volume")

// ObjConfig says what RunObj measures. Every combination of a size and a
// concurrency level is one cell; a cell writes Objects(size, concurrency)
// objects.
type ObjConfig struct {
	Sizes       []int64 `json:"sizes"`       // object sizes in bytes
	Concurrency []int   `json:"concurrency"` // operations in flight
	// BytesPerCell bounds the bytes a cell writes: a cell writes
	// BytesPerCell/size objects, at least its concurrency and at most
	// MaxObjects.
	BytesPerCell int64 `json:"bytes_per_cell"`
	MaxObjects   int   `json:"max_objects"`
	// MaxInflight skips cells whose size × concurrency exceeds it (the
	// report lists them); 0 means no limit.
	MaxInflight int64 `json:"max_inflight"`
	// ListPage is the page size of the measured List calls.
	ListPage int `json:"list_page"`
	// Prefix is the key prefix objbench works under; empty means a new
	// unique one ("agentfs-objbench-<time>-<random>").
	Prefix string `json:"prefix,omitempty"`
	// Progress, if not nil, is called before each measured operation kind
	// of each cell, from the goroutine that calls RunObj.
	Progress func(ObjProgress) `json:"-"`
	// Now is the clock for the report's start time; nil means time.Now.
	Now func() time.Time `json:"-"`
}

// ObjProgress says which operation of which cell is about to run.
type ObjProgress struct {
	Cell, Cells int // 1-based
	Size        int64
	Concurrency int
	Op          string
}

// DefaultObjConfig measures 4 KiB to 64 MiB objects at 1 to 64 operations
// in flight, in a few minutes on a local disk.
func DefaultObjConfig() ObjConfig {
	return ObjConfig{
		Sizes:        []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20},
		Concurrency:  []int{1, 4, 16, 64},
		BytesPerCell: 128 << 20,
		MaxObjects:   256,
		MaxInflight:  1 << 30,
		ListPage:     100,
	}
}

// QuickObjConfig is a sub-minute smoke run.
func QuickObjConfig() ObjConfig {
	return ObjConfig{
		Sizes:        []int64{4 << 10, 64 << 10, 1 << 20},
		Concurrency:  []int{1, 8},
		BytesPerCell: 8 << 20,
		MaxObjects:   64,
		MaxInflight:  64 << 20,
		ListPage:     100,
	}
}

// Validate reports the first setting that cannot be used.
func (c ObjConfig) Validate() error {
	if len(c.Sizes) == 0 || len(c.Concurrency) == 0 {
		return errors.New("objbench: no sizes or no concurrency levels")
	}
	for _, s := range c.Sizes {
		if s < 0 {
			return fmt.Errorf("objbench: object size %d is negative", s)
		}
	}
	for _, n := range c.Concurrency {
		if n < 1 {
			return fmt.Errorf("objbench: concurrency %d, must be at least 1", n)
		}
	}
	if c.MaxObjects < 1 || c.ListPage < 1 {
		return errors.New("objbench: max objects and list page size must be at least 1")
	}
	return nil
}

// Objects returns how many objects a cell of the given size and
// concurrency writes.
func (c ObjConfig) Objects(size int64, conc int) int {
	n := c.MaxObjects
	if size > 0 {
		n = int(min(int64(c.MaxObjects), c.BytesPerCell/size))
	}
	return max(n, conc, 1)
}

// The operation kinds objbench measures, in the order it runs them.
const (
	ObjPut         = "put"
	ObjStat        = "stat"
	ObjGet         = "get"
	ObjList        = "list"
	ObjPutIfAbsent = "put-if-absent"
	ObjDelete      = "delete"
)

// ObjOps lists the operation kinds in the order objbench runs them.
func ObjOps() []string {
	return []string{ObjPut, ObjStat, ObjGet, ObjList, ObjPutIfAbsent, ObjDelete}
}

// ObjReport is the result of RunObj, and the JSON `agentfs objbench
// --json` prints.
type ObjReport struct {
	Schema  int           `json:"schema"`
	Tool    string        `json:"tool"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Machine Machine       `json:"machine"`
	URL     string        `json:"url"`
	Prefix  string        `json:"prefix"`
	Config  ObjConfig     `json:"config"`
	Cells   []ObjCell     `json:"cells"`
	Skipped []ObjSkip     `json:"skipped,omitempty"`
	// Cleaned is the number of objects objbench deleted at the end because
	// a measured delete had not removed them (normally only the
	// conditional-create race keys).
	Cleaned int `json:"cleaned"`
}

// ObjCell is the measurement of one size at one concurrency level.
type ObjCell struct {
	Size        int64         `json:"size"`
	Concurrency int           `json:"concurrency"`
	Objects     int           `json:"objects"`
	Ops         []ObjOpResult `json:"ops"`
	// RaceWinners is how many of Concurrency simultaneous conditional
	// creates of one key succeeded: 1 on a correct store. Measured only in
	// cells of the smallest size with concurrency above 1 (0 elsewhere).
	RaceWinners int `json:"race_winners,omitempty"`
}

// ObjOpResult is one operation kind in one cell.
type ObjOpResult struct {
	Op        string        `json:"op"`
	Ops       int64         `json:"ops"`
	Bytes     int64         `json:"bytes"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	OpsPerSec float64       `json:"ops_per_sec"`
	MiBPerSec float64       `json:"mib_per_sec"`
	Latency   Latency       `json:"latency"`
	// Retries counts attempts beyond the first, from the store's metrics.
	Retries int64 `json:"retries"`
}

// ObjSkip is a cell that was not run, and why.
type ObjSkip struct {
	Size        int64  `json:"size"`
	Concurrency int    `json:"concurrency"`
	Reason      string `json:"reason"`
}

// Op returns the result of op in c, or false.
func (c ObjCell) Op(op string) (ObjOpResult, bool) {
	for _, r := range c.Ops {
		if r.Op == op {
			return r, true
		}
	}
	return ObjOpResult{}, false
}

// RunObj measures st under a unique prefix of its own, which it removes
// at the end, whatever happened. It refuses (an error matching ErrVolume)
// a store whose root holds VolumeKey, and a prefix that already holds
// objects. The store's concurrency limit (blobstore.Options) must be at
// least the largest concurrency level, or the levels above it measure the
// limit.
func RunObj(ctx context.Context, st *blobstore.Store, cfg ObjConfig) (rep *ObjReport, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	if _, err := st.Stat(ctx, VolumeKey); err == nil {
		return nil, fmt.Errorf("objbench: %w: %s has %s at its root; point objbench at an empty prefix of the bucket, e.g. %s/objbench-scratch",
			ErrVolume, st.URL(), VolumeKey, st.URL())
	} else if !errors.Is(err, blobstore.ErrNotFound) {
		return nil, fmt.Errorf("objbench: check for a volume: %w", err)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("objbench: %w", err)
		}
		prefix = fmt.Sprintf("agentfs-objbench-%s-%s", started.UTC().Format("20060102T150405"), hex.EncodeToString(b[:]))
	}
	sub := st.Sub(prefix)
	page, err := sub.List(ctx, "", "", 1)
	if err != nil {
		return nil, fmt.Errorf("objbench: %w", err)
	}
	if len(page.Objects) > 0 {
		return nil, fmt.Errorf("objbench: prefix %s already holds objects (%s); choose another", sub.URL(), page.Objects[0].Key)
	}
	rep = &ObjReport{Schema: ObjReportSchema, Tool: "agentfs objbench", Started: started.UTC(), Machine: ReadMachine(),
		URL: st.URL(), Prefix: prefix, Config: cfg}
	defer func() {
		// Remove everything under the prefix, even after a failure or a
		// cancellation.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		n, cerr := removePrefix(cctx, sub)
		if cerr == nil {
			cerr = removeEmptyFileDirs(sub.URL())
		}
		if rep != nil {
			rep.Cleaned = n
			rep.Elapsed = now().Sub(started)
		}
		if cerr != nil {
			err = errors.Join(err, fmt.Errorf("objbench: clean up %s: %w", sub.URL(), cerr))
		}
	}()
	maxSize := slices.Max(cfg.Sizes)
	data := make([]byte, maxSize)
	newDataGen(42).fill(data, 0)
	smallest := slices.Min(cfg.Sizes)
	type cellSpec struct {
		size int64
		conc int
	}
	var cells []cellSpec
	for _, size := range cfg.Sizes {
		for _, conc := range cfg.Concurrency {
			if cfg.MaxInflight > 0 && size*int64(conc) > cfg.MaxInflight {
				rep.Skipped = append(rep.Skipped, ObjSkip{Size: size, Concurrency: conc,
					Reason: fmt.Sprintf("%s × %d in flight exceeds --max-inflight %s", fmtSize(size), conc, fmtSize(cfg.MaxInflight))})
				continue
			}
			cells = append(cells, cellSpec{size, conc})
		}
	}
	for i, c := range cells {
		cell, err := runCell(ctx, sub, cfg, data[:c.size], c.conc, c.size == smallest, fmt.Sprintf("s%d-c%d", c.size, c.conc),
			func(op string) {
				if cfg.Progress != nil {
					cfg.Progress(ObjProgress{Cell: i + 1, Cells: len(cells), Size: c.size, Concurrency: c.conc, Op: op})
				}
			})
		if err != nil {
			return rep, fmt.Errorf("objbench: %s objects, concurrency %d: %w", fmtSize(c.size), c.conc, err)
		}
		rep.Cells = append(rep.Cells, cell)
	}
	return rep, nil
}

// runCell measures every operation kind for one size and concurrency,
// under dir/ in st.
func runCell(ctx context.Context, st *blobstore.Store, cfg ObjConfig, data []byte, conc int, race bool, dir string, progress func(string)) (ObjCell, error) {
	size := int64(len(data))
	n := cfg.Objects(size, conc)
	cell := ObjCell{Size: size, Concurrency: conc, Objects: n}
	key := func(i int) string { return fmt.Sprintf("%s/obj-%06d", dir, i) }
	pia := func(i int) string { return fmt.Sprintf("%s/pia-%06d", dir, i) }
	measure := func(op string, count int, fn func(i int) (int64, error)) error {
		progress(op)
		bop := blobOp(op)
		before := st.Metrics().Snapshot(bop)
		res, err := timeParallel(ctx, count, conc, fn)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		after := st.Metrics().Snapshot(bop)
		res.Op = op
		res.Retries = (after.Attempts - before.Attempts) - (after.Calls - before.Calls)
		cell.Ops = append(cell.Ops, res)
		return nil
	}
	steps := []struct {
		op    string
		count int
		fn    func(i int) (int64, error)
	}{
		{ObjPut, n, func(i int) (int64, error) {
			return size, st.PutReader(ctx, key(i), bytes.NewReader(data), size)
		}},
		{ObjStat, n, func(i int) (int64, error) {
			a, err := st.Stat(ctx, key(i))
			if err == nil && a.Size != size {
				err = fmt.Errorf("stat %s: size %d, wrote %d", key(i), a.Size, size)
			}
			return 0, err
		}},
		{ObjGet, n, func(i int) (int64, error) {
			r, err := st.NewRangeReader(ctx, key(i), 0, -1)
			if err != nil {
				return 0, err
			}
			got, err := io.Copy(io.Discard, r)
			if cerr := r.Close(); err == nil {
				err = cerr
			}
			if err == nil && got != size {
				err = fmt.Errorf("get %s: read %d bytes, wrote %d", key(i), got, size)
			}
			return got, err
		}},
		{ObjList, min(n, 64), func(int) (int64, error) {
			p, err := st.List(ctx, dir+"/obj-", "", cfg.ListPage)
			if err == nil && len(p.Objects) != min(n, cfg.ListPage) {
				err = fmt.Errorf("list %s/: %d objects on the first page, expected %d", dir, len(p.Objects), min(n, cfg.ListPage))
			}
			return 0, err
		}},
		{ObjPutIfAbsent, n, func(i int) (int64, error) {
			return size, st.PutIfAbsent(ctx, pia(i), data)
		}},
		{ObjDelete, 2 * n, func(i int) (int64, error) {
			if i < n {
				return 0, st.Delete(ctx, key(i))
			}
			return 0, st.Delete(ctx, pia(i-n))
		}},
	}
	for _, s := range steps {
		if err := measure(s.op, s.count, s.fn); err != nil {
			return cell, err
		}
	}
	if race && conc > 1 {
		w, err := raceCreate(ctx, st, dir+"/race", data, conc)
		if err != nil {
			return cell, err
		}
		cell.RaceWinners = w
		if w != 1 {
			return cell, fmt.Errorf("%d of %d simultaneous conditional creates of one key succeeded; exactly 1 must", w, conc)
		}
	}
	return cell, nil
}

// raceCreate runs conc simultaneous PutIfAbsent calls on one key and
// returns how many succeeded. A loser must fail with ErrExists.
func raceCreate(ctx context.Context, st *blobstore.Store, key string, data []byte, conc int) (int, error) {
	var wins atomic.Int32
	var g errgroup.Group
	startGate := make(chan struct{})
	for range conc {
		g.Go(func() error {
			<-startGate
			err := st.PutIfAbsent(ctx, key, data)
			switch {
			case err == nil:
				wins.Add(1)
				return nil
			case errors.Is(err, blobstore.ErrExists):
				return nil
			default:
				return err
			}
		})
	}
	close(startGate)
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("conditional-create race: %w", err)
	}
	return int(wins.Load()), nil
}

// timeParallel runs fn(0..count-1) on conc workers, timing each call.
func timeParallel(ctx context.Context, count, conc int, fn func(i int) (int64, error)) (ObjOpResult, error) {
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, count)
	var bytesMoved int64
	g, gctx := errgroup.WithContext(ctx)
	start := time.Now()
	for range min(conc, count) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= count {
					return nil
				}
				if err := gctx.Err(); err != nil {
					return err
				}
				t := time.Now()
				b, err := fn(i)
				d := time.Since(t)
				if err != nil {
					return err
				}
				mu.Lock()
				lat = append(lat, d)
				bytesMoved += b
				mu.Unlock()
			}
		})
	}
	if err := g.Wait(); err != nil {
		return ObjOpResult{}, err
	}
	el := time.Since(start)
	sec := max(el.Seconds(), 1e-9)
	return ObjOpResult{Ops: int64(count), Bytes: bytesMoved, Elapsed: el, OpsPerSec: float64(count) / sec,
		MiBPerSec: float64(bytesMoved) / (1 << 20) / sec, Latency: LatencyOf(lat)}, nil
}

func blobOp(op string) blobstore.Op {
	switch op {
	case ObjPut:
		return blobstore.OpPut
	case ObjStat:
		return blobstore.OpStat
	case ObjGet:
		return blobstore.OpGet
	case ObjList:
		return blobstore.OpList
	case ObjPutIfAbsent:
		return blobstore.OpPutIfAbsent
	default:
		return blobstore.OpDelete
	}
}

// removePrefix deletes every object in st and returns how many it found.
func removePrefix(ctx context.Context, st *blobstore.Store) (int, error) {
	var keys []string
	if err := st.Walk(ctx, "", func(o blobstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		return 0, err
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, k := range keys {
		g.Go(func() error { return st.Delete(ctx, k) })
	}
	return len(keys), g.Wait()
}

// removeEmptyFileDirs removes the directories a file:// store leaves
// behind under the objbench prefix once its objects are deleted. Only
// empty directories are removed; for other schemes it does nothing.
func removeEmptyFileDirs(storeURL string) error {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return nil
	}
	root := filepath.FromSlash(u.Path)
	var dirs []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, d := range slices.Backward(dirs) {
		if err := os.Remove(d); err != nil {
			return fmt.Errorf("remove the emptied directory %s: %w", d, err)
		}
	}
	return nil
}
