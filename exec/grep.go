package exec

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// GrepOptions refine Grep. The zero value searches the whole root with a
// regular expression, case-sensitively, for at most DefaultGrepLimit matches.
type GrepOptions struct {
	// Path is a file or directory to search, relative to the backend's
	// root; "" means the root.
	Path string
	// Glob, when set, keeps only files whose path (relative to the
	// backend's root) matches it, with Glob's syntax; a pattern without a
	// slash is matched against the file's name alone ("*.go").
	Glob string
	// Literal searches for the pattern as a plain string.
	Literal bool
	// IgnoreCase matches letters in either case.
	IgnoreCase bool
	// MaxResults caps the matches returned; 0 means DefaultGrepLimit, a
	// negative value means no cap.
	MaxResults int
}

// GrepMatch is one matching line.
type GrepMatch struct {
	// Path is relative to the backend's root, slash separated.
	Path string
	// Line is the 1-based line number.
	Line int
	// Text is the line without its newline.
	Text string
}

// GrepResult is what Grep found, in path order then line order.
type GrepResult struct {
	Matches []GrepMatch
	// Truncated is set when more matches existed than MaxResults.
	Truncated bool
}

// grepMaxLine is the longest line Grep looks at; a file with a longer line
// is searched up to it.
const grepMaxLine = 1 << 20

// Grep searches the text files under opts.Path for pattern (Go RE2 syntax,
// or a literal with opts.Literal), line by line. Binary files (a NUL byte in
// their first 8 KiB) are skipped, symlinks are not followed. An invalid
// pattern gives ErrInvalid.
func (b *Backend) Grep(ctx context.Context, pattern string, opts GrepOptions) (*GrepResult, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	expr := pattern
	if opts.Literal {
		expr = regexp.QuoteMeta(pattern)
	}
	if opts.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("grep %q: %w: %w", pattern, ErrInvalid, err)
	}
	var globSegs []string
	if opts.Glob != "" {
		globSegs = strings.Split(path.Clean(opts.Glob), "/")
		for _, s := range globSegs {
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("grep glob %q: %w: %w", opts.Glob, ErrInvalid, err)
			}
		}
	}
	limit := opts.MaxResults
	if limit == 0 {
		limit = DefaultGrepLimit
	}
	start := opts.Path
	if start == "" {
		start = "."
	}
	base, err := b.resolve("grep", start, true)
	if err != nil {
		return nil, err
	}
	res := &GrepResult{Matches: []GrepMatch{}}
	errFull := errors.New("full")
	fsys := b.s.root.FS()
	err = fs.WalkDir(fsys, base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != base && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		shown := b.display(p)
		if globSegs != nil {
			target := strings.Split(shown, "/")
			if len(globSegs) == 1 && globSegs[0] != "**" {
				target = target[len(target)-1:]
			}
			if !matchGlob(globSegs, target) {
				return nil
			}
		}
		return grepFile(fsys, p, shown, re, limit, res, errFull)
	})
	if err != nil && !errors.Is(err, errFull) {
		return nil, b.errPathOp("grep", start, err)
	}
	return res, nil
}

// grepFile appends the matches of one file; it returns full once the cap is
// passed.
func grepFile(fsys fs.FS, p, shown string, re *regexp.Regexp, limit int, res *GrepResult, full error) error {
	f, err := fsys.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil
		}
		return err
	}
	defer func() { _ = f.Close() }()
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(binarySniff)
	if bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64<<10), grepMaxLine)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if !re.Match(line) {
			continue
		}
		if limit >= 0 && len(res.Matches) >= limit {
			res.Truncated = true
			return full
		}
		res.Matches = append(res.Matches, GrepMatch{Path: shown, Line: n, Text: strings.TrimSuffix(string(line), "\r")})
	}
	// A line longer than grepMaxLine ends the search of this file; other
	// read errors are reported.
	if err := sc.Err(); err != nil && !errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("grep %s: %w", shown, err)
	}
	return nil
}
