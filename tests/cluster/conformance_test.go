package cluster_test

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/stack"
	"github.com/relaywasm/relaywasm/librelay"
)

// The relay conformance suite (tests/conformance) passes against node 1 of
// a running cluster, through its -relay flags, as it would against anyone's
// relay: its runtime and browsers all dial node 1, which routes through
// NATS like every node. It runs as a child `go test` because the suite's
// flags are its own. The grace-expiry test runs on a cluster of its own with
// a one-second grace: on a relay shared by the whole suite, the graces of
// earlier tests' dropped sockets would run out during it and their detaches
// reach its runtime first (as on a single relay).
func TestConformanceAgainstNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the conformance suite")
	}
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "conformance.test")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "test", "-c", "-o", bin, "./tests/conformance")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the conformance suite: %v\n%s", err, out)
	}
	t.Run("suite", func(t *testing.T) { conformance(t, bin, 0, "-grace=0") })
	t.Run("grace", func(t *testing.T) { conformance(t, bin, time.Second, "-grace=1s", "-test.run=TestGraceExpiryDetaches") })
}

func conformance(t *testing.T, bin string, grace time.Duration, flags ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	c, err := stack.StartCluster(ctx, stack.ClusterConfig{
		Nodes: 3, RelayOnly: true, Instance: "conf", ClientToken: "client", RuntimeToken: "runtime",
		Logger: slog.New(slog.DiscardHandler),
		EditRelay: func(_ int, c *relay.Config) {
			c.ClientCredentials["other-client"] = "conf"
			c.ClientCredentials["any-client"] = relay.AnyInstance
			c.RuntimeCredentials["any-runtime"] = relay.AnyInstance
			c.Limits.Grace = grace
			if grace == 0 {
				// The suite shares one relay: no grace of an earlier test's
				// dropped socket may run out (nor an id yield at the
				// per-instance limit) during a later test, whose runtime
				// would then read an acp.detach where the rule expects the
				// relay's reply. The in-process suite has a relay per test.
				c.Limits.Grace, c.Limits.AttachmentsPerInstance = time.Hour, 1<<16
			}
			// What the in-process suite sets for its flood rules (a queue
			// the -flood-bytes flood overflows, no heartbeat the raw peers
			// would have to answer, a close timeout that outlasts the
			// flood), for the whole run: the suite cannot configure a relay
			// it does not run. The rules needing -heartbeat skip here.
			c.Limits.QueueFrames, c.Limits.QueueBytes = 1024, 256<<10
			c.Limits.HeartbeatInterval = time.Hour
			c.Limits.CloseTimeout = 2 * time.Minute
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cmd := exec.Command(bin, append(append([]string{"-test.timeout=5m", "-test.v"}, flags...),
		"-relay="+c.Node(1).HTTPURL(), "-instance=conf", "-runtime-token=runtime", "-client-token=client",
		"-other-client-token=other-client", "-any-client-token=any-client", "-any-runtime-token=any-runtime",
		"-relay-key="+librelay.FormatPublicKey(c.PublicKey()), "-origin=http://127.0.0.1",
		"-flood-bytes=8388608")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("conformance against node 1: %v\n%s", err, out)
	}
	t.Logf("%d passed, %d skipped", bytes.Count(out, []byte("--- PASS")), bytes.Count(out, []byte("--- SKIP")))
}
