package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/relaywasm/relaywasm/demo/relay"
	"github.com/relaywasm/relaywasm/demo/relay/relaytest"
	"github.com/relaywasm/relaywasm/librelay"
	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

var (
	flagRelay        = flag.String("relay", "", "base URL of the relay under test (http://host:port or https://host:port); empty runs the dev relay in-process")
	flagCA           = flag.String("ca", "", "with an https -relay: PEM file of the CA that signed the relay's certificate (empty: the system roots)")
	flagTLS          = flag.String("tls", "both", "in-process relay: plain, tls, or both (every rule over plain HTTP, then again over TLS)")
	flagInstance     = flag.String("instance", "demo", "instance the suite connects its runtime as")
	flagRuntimeToken = flag.String("runtime-token", "", "runtime credential for -instance")
	flagClientToken  = flag.String("client-token", "", "browser credential for -instance")
	flagRelayKey     = flag.String("relay-key", "", "the relay's public key (librelay.FormatPublicKey)")
	flagOrigin       = flag.String("origin", "", "an Origin the relay accepts (empty sends none)")
	flagBadOrigin    = flag.String("bad-origin", "http://evil.example", "an Origin the relay must refuse")
	flagOtherClient  = flag.String("other-client-token", "", "a second browser credential allowed on -instance")
	flagAnyClient    = flag.String("any-client-token", "", "a browser credential allowed on any instance")
	flagAnyRuntime   = flag.String("any-runtime-token", "", "a runtime credential allowed on any instance")
	flagGrace        = flag.Duration("grace", 0, "the relay's grace period; 0 skips the grace-expiry test")
	flagHeartbeat    = flag.Bool("heartbeat", false, "probe the relay's idle-peer heartbeat (waits its interval plus timeout)")
	flagFrameLimit   = flag.Int("frame-limit", 1<<20, "the relay's browser-leg frame limit in bytes")
	flagHelloLimit   = flag.Int("hello-limit", 4<<10, "the relay's hello size limit in bytes")
	flagFloodBytes   = flag.Int("flood-bytes", 64<<20, "bytes sent to a socket that stops reading, to make it a slow consumer")
)

// suite is the relay under test and what the suite knows about it.
type suite struct {
	*relaytest.Env
	otherClient, anyClient, anyRuntime string
	frameLimit, helloLimit, floodBytes int
}

func inProcess() bool { return *flagRelay == "" }

// overTLS is set while the in-process run serves the relay over TLS.
var overTLS bool

// TestMain runs every rule against the in-process relay over plain HTTP and
// then again over TLS (-tls=both, the default; what make test runs), with a
// certificate relaytest makes for each test. Against an external relay the
// URL's scheme decides, and the rules run once.
func TestMain(m *testing.M) {
	flag.Parse()
	runs := map[string][]bool{"plain": {false}, "tls": {true}, "both": {false, true}}[*flagTLS]
	if !inProcess() {
		runs = []bool{false}
	}
	if runs == nil {
		fmt.Fprintf(os.Stderr, "-tls=%q: want plain, tls or both\n", *flagTLS)
		os.Exit(2)
	}
	for _, tls := range runs {
		overTLS = tls
		if tls && len(runs) > 1 {
			fmt.Println("conformance: the same rules again, with the relay over TLS")
		}
		if code := m.Run(); code != 0 {
			os.Exit(code)
		}
	}
}

// newSuite returns the relay for one test: a fresh in-process dev relay
// (edit may change its config), or the external relay from the flags.
func newSuite(t *testing.T, edit func(*relay.Config)) *suite {
	t.Helper()
	if !inProcess() {
		return externalSuite(t)
	}
	start := relaytest.Start
	if overTLS {
		start = relaytest.StartTLS
		t.Log("relay served over TLS")
	}
	env := start(t, func(c *relay.Config) {
		c.ClientCredentials["other-client"] = "test"
		c.Limits.BrowserFrameBytes = 256 << 10
		c.Limits.TakeoverWait = 2 * time.Second
		if edit != nil {
			edit(c)
		}
	})
	l := env.Config.Limits
	return &suite{
		Env: env, otherClient: "other-client", anyClient: "any-client", anyRuntime: "any-runtime",
		frameLimit: l.BrowserFrameBytes, helloLimit: l.HelloBytes, floodBytes: 8 << 20,
	}
}

func externalSuite(t *testing.T) *suite {
	key, err := librelay.ParsePublicKey(*flagRelayKey)
	if err != nil {
		t.Fatalf("-relay-key: %v", err)
	}
	base := strings.TrimSuffix(*flagRelay, "/")
	env := &relaytest.Env{
		HTTPURL:   base,
		AttachURL: "ws" + strings.TrimPrefix(base, "http") + relayleg.AttachPath,
		Instance:  *flagInstance, ClientToken: *flagClientToken, RuntimeToken: *flagRuntimeToken,
		Key: key, Origin: *flagOrigin,
	}
	if strings.HasPrefix(base, "https://") {
		env.TLS = &tls.Config{}
		if *flagCA != "" {
			pem, err := os.ReadFile(*flagCA)
			if err != nil {
				t.Fatalf("-ca: %v", err)
			}
			env.TLS.RootCAs = x509.NewCertPool()
			if !env.TLS.RootCAs.AppendCertsFromPEM(pem) {
				t.Fatalf("-ca: no certificate in %s", *flagCA)
			}
		}
	}
	return &suite{
		Env: env, otherClient: *flagOtherClient, anyClient: *flagAnyClient, anyRuntime: *flagAnyRuntime,
		frameLimit: *flagFrameLimit, helloLimit: *flagHelloLimit, floodBytes: *flagFloodBytes,
	}
}

// needInProcess skips a test that needs to configure or restart the relay.
func needInProcess(t *testing.T, why string) {
	if !inProcess() {
		t.Skip("needs the in-process relay: " + why)
	}
}

func need(t *testing.T, ok bool, why string) {
	if !ok {
		t.Skip(why)
	}
}

// pair connects the suite's raw runtime and attaches one browser.
func (s *suite) pair(t *testing.T) (*relaytest.Runtime, *relaytest.Browser) {
	t.Helper()
	rt := s.Connect(t)
	return rt, s.Attach(t, "")
}

// msg builds an acp.message on b's route.
func msg(b *relaytest.Browser, payload string) librelay.Frame {
	return librelay.Frame{Type: librelay.TypeACPMessage, Instance: b.Instance, Session: b.Session, Payload: []byte(payload)}
}

// mustRead reads the browser's next frame, skipping (and answering) the
// relay's heartbeat probes, which may come at any time.
func mustRead(t *testing.T, b *relaytest.Browser) librelay.Frame {
	t.Helper()
	for {
		f, err := b.Read()
		if err != nil {
			t.Fatalf("browser read: %v (close code %d)", err, relaytest.CloseCode(err))
		}
		if f.Type != librelay.TypeHeartbeat {
			return f
		}
		if f.IsRequest() {
			b.Send(librelay.Frame{Type: librelay.TypeAck, ReplyTo: f.ID})
		}
	}
}

// mustCargo reads the runtime's next non-heartbeat frame.
func mustCargo(t *testing.T, rt *relaytest.Runtime) librelay.Frame {
	t.Helper()
	f, err := rt.ReadCargo()
	if err != nil {
		t.Fatalf("runtime read: %v", err)
	}
	return f
}

// wantError checks f is relay.error with code answering re.
func wantError(t *testing.T, f librelay.Frame, code, re string) {
	t.Helper()
	var e librelay.Error
	if f.Type != librelay.TypeError || e.UnmarshalJSON(f.Payload) != nil || e.Code != code || f.ReplyTo != re {
		t.Fatalf("want relay.error %s re %q, got %s re %q payload %s", code, re, f.Type, f.ReplyTo, f.Payload)
	}
}

// wantClose reads until the relay closes b and checks the close code.
func wantClose(t *testing.T, b *relaytest.Browser, code string) {
	t.Helper()
	if _, closeCode := b.ReadUntilClosed(); closeCode != relayleg.CloseFor(code) {
		t.Fatalf("closed with %d, want %d (%s)", closeCode, relayleg.CloseFor(code), code)
	}
}

// wantClosedWith reads until the relay closes b and checks that it sent
// relay.error code among the last frames and closed with the code's close
// code.
func wantClosedWith(t *testing.T, b *relaytest.Browser, code string) {
	t.Helper()
	frames, closeCode := b.ReadUntilClosed()
	if want := relayleg.CloseFor(code); closeCode != want {
		t.Fatalf("closed with %d, want %d (%s)", closeCode, want, code)
	}
	for i := len(frames) - 1; i >= 0; i-- {
		var e librelay.Error
		if frames[i].Type == librelay.TypeError && e.UnmarshalJSON(frames[i].Payload) == nil && e.Code == code {
			return
		}
	}
	t.Fatalf("closed %d without a relay.error %s before it", closeCode, code)
}
