package gateway_test

import (
	"os"
	"testing"

	"github.com/highload-lab/hlab/internal/deps/depstest"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }
