package webdriver

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// xvfb is a virtual X display of the run's own, for WebKitGTK, which needs
// a display even when nobody looks. Xvfb picks a free display number itself
// (-displayfd), so parallel runs never collide; with no -auth, only local
// clients connect.
type xvfb struct {
	cmd     *exec.Cmd
	display string
}

func startXvfb() (*xvfb, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x1024x24", "-nolisten", "tcp")
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting Xvfb (Debian's xvfb package): %w", err)
	}
	w.Close()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(r).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case n := <-line:
		if n == "" {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("Xvfb exited without naming its display")
		}
		return &xvfb{cmd: cmd, display: ":" + n}, nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("Xvfb named no display within 30s")
	}
}

func (x *xvfb) close() {
	x.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { x.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		x.cmd.Process.Kill()
		<-done
	}
}
