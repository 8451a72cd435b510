package backend

import (
	"flag"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// RegisterFlags registers the back's flags on fs ("hlab serve backend"),
// with the package's defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Mode = Normal
	fs.Var(cliflag.Text(&c.Mode), "mode", "normal, trickle (headers at once, body a byte per --trickle-interval) or blackhole (never answers)")
	fs.DurationVar(&c.Delay, "delay", DefaultDelay, "how long a normal answer takes")
	fs.Float64Var(&c.SlowFraction, "slow-fraction", 0.1, "share of requests (0-1) that take --slow-delay instead (report E: 1 in 10)")
	fs.DurationVar(&c.SlowDelay, "slow-delay", DefaultSlowDelay, "how long a slow answer takes")
	fs.DurationVar(&c.TrickleInterval, "trickle-interval", DefaultTrickleInterval, "trickle mode: pause before each body byte")
	fs.IntVar(&c.BodyBytes, "body-bytes", DefaultBodyBytes, "size of the answer")
}

// Args returns the command line that makes "hlab serve backend" run c (the
// fields c changes from the defaults).
func (c Config) Args() []string { return cliflag.Args(c) }
