// Command hlab is Highload Lab: it runs the reference reports' experiments
// on this machine (hlab lab), generates load (hlab load), runs one service
// (hlab serve), and manages real dependencies (hlab deps).
package main

import (
	"os"

	"github.com/highload-lab/hlab/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Std()))
}
