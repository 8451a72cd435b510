// Command databus-checker drives a databus gateway with report D's
// checker scenarios (echo, latency, throughput, ticker; consumer groups)
// and verifies that every acknowledged message is delivered. See
// internal/checker.
//
//	databus-checker --target 127.0.0.1:7070 --topic orders --scenario throughput --groups 2 --members 3
package main

import (
	"os"

	"github.com/highload-lab/hlab/internal/checker"
)

func main() { os.Exit(checker.Main(os.Args[1:], os.Stdout, os.Stderr)) }
