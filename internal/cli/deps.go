package cli

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/highload-lab/hlab/internal/deps"
)

func runDeps(args []string, st *State) int {
	fs := newFlagSet(st, "deps", "hlab deps status|install [NAME...]", `
Checks and installs the real dependencies the lab and tests use.
  status            which dependencies are installed, with their versions
  install NAME...   install them from Debian's packages (needs root and apt-get)

Known: nginx (load balancer of the scale experiment), wrk (for side-by-side
checks of hlab load). The lab starts and stops them itself; when nginx is
missing it uses its built-in load balancer and says so.`)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return 2
	}
	switch pos[0] {
	case "status":
		if _, v, err := deps.FindNginx(); err == nil {
			fmt.Fprintf(st.Stdout, "nginx  installed, %s\n", v)
		} else {
			fmt.Fprintf(st.Stdout, "nginx  missing (hlab deps install nginx); the lab falls back to its built-in load balancer\n")
		}
		if p, err := exec.LookPath("wrk"); err == nil {
			fmt.Fprintf(st.Stdout, "wrk    installed, %s\n", p)
		} else {
			fmt.Fprintf(st.Stdout, "wrk    missing (hlab deps install wrk); only the comparison script needs it\n")
		}
		return 0
	case "install":
		names := pos[1:]
		if len(names) == 0 {
			names = []string{"nginx", "wrk"}
		}
		for _, n := range names {
			if n != "nginx" && n != "wrk" {
				return fail(st, "deps", 2, fmt.Errorf("no installer for %q; known: nginx, wrk", n))
			}
		}
		if err := deps.AptInstall(st.Stderr, names...); err != nil {
			return fail(st, "deps", 1, err)
		}
		return 0
	case "up", "down":
		return fail(st, "deps", 2, fmt.Errorf("%s: no dependency has a standalone mode yet; the lab starts and stops %s itself", pos[0], strings.Join(pos[1:], ", ")))
	}
	return fail(st, "deps", 2, fmt.Errorf("unknown action %q: use status or install", pos[0]))
}
