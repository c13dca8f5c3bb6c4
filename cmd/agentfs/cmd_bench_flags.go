package main

import (
	"fmt"
	"strings"

	"github.com/agentfs/agentfs/bench"
)

// sizeValue is a pflag.Value for a byte count such as 4KiB or 256MiB.
type sizeValue struct{ p *int64 }

func (v sizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return bench.FormatSize(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := bench.ParseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// sizesValue is a pflag.Value for a comma-separated list of byte counts.
type sizesValue struct{ p *[]int64 }

func (v sizesValue) String() string {
	if v.p == nil {
		return ""
	}
	var parts []string
	for _, n := range *v.p {
		parts = append(parts, bench.FormatSize(n))
	}
	return strings.Join(parts, ",")
}

func (v sizesValue) Set(s string) error {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		n, err := bench.ParseSize(part)
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	*v.p = out
	return nil
}

func (sizesValue) Type() string { return "sizes" }

// blockSizeValue is a pflag.Value for a byte count held in an int.
type blockSizeValue struct{ p *int }

func (v blockSizeValue) String() string {
	if v.p == nil {
		return ""
	}
	return bench.FormatSize(int64(*v.p))
}

func (v blockSizeValue) Set(s string) error {
	n, err := bench.ParseSize(s)
	if err != nil {
		return err
	}
	if n > 1<<30 {
		return fmt.Errorf("size %q: at most 1GiB", s)
	}
	*v.p = int(n)
	return nil
}

func (blockSizeValue) Type() string { return "size" }
