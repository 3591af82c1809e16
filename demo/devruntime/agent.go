package devruntime

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
)

// Agent command limits. MaxCount bounds one turn's work (100,000 chunks is the
// largest stream the tests and benchmarks ask for); MaxChunkSize keeps a chunk
// well under the relay's browser-leg frame limit (1 MiB by default).
// MaxEchoChunk bounds each chunk of an echo: a longer word is echoed in
// several chunks. The bound is in bytes of text, and encoding/json writes a
// byte as at most six (`<` is \u003c), so an echoed chunk encodes to at most
// 96 KiB plus the message around it, whatever the prompt holds.
const (
	MaxCount     = 100_000
	MaxChunkSize = 256 << 10
	MaxEchoChunk = 16 << 10
)

// EchoMethod is the ACP extension method the dev agent answers with its own
// params, untouched: one request, one response, no session, nothing streamed.
// Round-trip benchmarks use it because it measures the path, not the agent.
const EchoMethod = "_relaywasm/echo"

// devAgent is the deterministic ACP agent behind one attachment. Everything it
// says is a function of what it was asked, so a test can predict every chunk.
type devAgent struct {
	conn  *acp.AgentSideConnection
	rate  float64 // chunks per second; 0 streams as fast as the connection takes them
	pause *pause  // the runtime's: holds the stream between chunks while on
	// loadForgets is Config.LoadForgets: session/load of a session not
	// held answered as if loaded.
	loadForgets bool
	// refuseOverlap is Config.RefuseOverlap: a prompt while a turn runs is
	// refused, not started.
	refuseOverlap bool

	mu       sync.Mutex
	sessions map[acp.SessionId]*turn // running turn of each session, or nil
	talks    map[acp.SessionId]*conversation
	created  int
}

// turn is one running prompt; its pointer identifies it, so a finished turn
// cannot unregister the turn that replaced it.
type turn struct{ cancel context.CancelFunc }

var (
	_ acp.Agent                  = (*devAgent)(nil)
	_ acp.ExtensionMethodHandler = (*devAgent)(nil)
)

func newDevAgent(rate float64, p *pause) *devAgent {
	return &devAgent{rate: rate, pause: p, sessions: make(map[acp.SessionId]*turn), talks: make(map[acp.SessionId]*conversation)}
}

func (a *devAgent) Initialize(ctx context.Context, _ acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.pause.setup.wait(ctx)
	return acp.InitializeResponse{
		ProtocolVersion:   acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{LoadSession: true},
		AgentInfo:         &acp.Implementation{Name: "relaywasm-dev-agent", Version: "1"},
		AuthMethods:       []acp.AuthMethod{},
	}, nil
}

// NewSession numbers sessions per attachment ("s1", "s2", …) so a test knows
// the id before it asks.
func (a *devAgent) NewSession(ctx context.Context, _ acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.pause.setup.wait(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.created++
	id := acp.SessionId("s" + strconv.Itoa(a.created))
	a.sessions[id] = nil
	a.talks[id] = &conversation{}
	return acp.NewSessionResponse{SessionId: id}, nil
}

// Prompt streams the answer as agent_message_chunk updates and ends the turn.
// A prompt while a turn runs cancels that turn first, as a chat client expects
// (or is refused, under Config.RefuseOverlap).
func (a *devAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	text := promptText(p.Prompt)
	chunks, err := plan(text)
	if err != nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": err.Error()})
	}
	ctx, done, err := a.startTurn(ctx, p.SessionId)
	if errors.Is(err, errOverlap) {
		return acp.PromptResponse{StopReason: acp.StopReasonRefusal}, nil
	}
	if err != nil {
		return acp.PromptResponse{}, err
	}
	defer done()
	if isReadFile(text) {
		chunks = a.readFile(ctx, p.SessionId)
	} else if isPermission(text) {
		if chunks, err = a.askPermission(ctx, p.SessionId, text); err != nil {
			if ctx.Err() != nil {
				return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
			}
			return acp.PromptResponse{}, err
		}
	}
	if err := a.stream(ctx, p.SessionId, a.conversation(p.SessionId).begin(text, chunks)); err != nil {
		if ctx.Err() != nil {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// ReadFileWord starts a prompt whose turn first reads a file from the client
// (fs/read_text_file, path /big.txt) and then says how it went, in one
// chunk: "read N bytes", or "read failed: " and the error. It lets a test
// see what becomes of a client's answer too large to carry.
const ReadFileWord = "readfile"

func isReadFile(prompt string) bool {
	f := strings.Fields(prompt)
	return len(f) > 0 && f[0] == ReadFileWord
}

// readFile asks the client for /big.txt and plans the chunk that says what
// came back.
func (a *devAgent) readFile(ctx context.Context, id acp.SessionId) chunkPlan {
	r, err := a.conn.ReadTextFile(ctx, acp.ReadTextFileRequest{SessionId: id, Path: "/big.txt"})
	msg := "read " + strconv.Itoa(len(r.Content)) + " bytes"
	if err != nil {
		msg = "read failed: " + err.Error()
	}
	return chunkPlan{n: 1, text: func(int) string { return msg }}
}

// errOverlap is startTurn's refusal of a turn while one runs
// (Config.RefuseOverlap).
var errOverlap = errors.New("a turn of the session is running")

// startTurn registers a cancellable turn for the session, cancelling the one
// before it (or refusing, with errOverlap, under Config.RefuseOverlap);
// done unregisters it unless a later turn has replaced it.
func (a *devAgent) startTurn(parent context.Context, id acp.SessionId) (context.Context, func(), error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, ok := a.sessions[id]
	if !ok {
		return nil, nil, acp.NewInvalidParams(map[string]any{"error": "unknown session " + string(id)})
	}
	if prev != nil && a.refuseOverlap {
		return nil, nil, errOverlap
	}
	if a.refuseOverlap {
		// The ACP SDK cancels a session's running prompt when another
		// comes; an agent that refuses the other keeps the running one:
		// its turn ends by session/cancel, or with the connection (the
		// client requests and updates it waits on fail then).
		parent = context.WithoutCancel(parent)
	}
	if prev != nil {
		prev.cancel()
	}
	ctx, cancel := context.WithCancel(parent)
	t := &turn{cancel: cancel}
	a.sessions[id] = t
	return ctx, func() {
		cancel()
		a.mu.Lock()
		if a.sessions[id] == t {
			a.sessions[id] = nil
		}
		a.mu.Unlock()
	}, nil
}

// Cancel ends the session's running turn; the turn answers with "cancelled".
func (a *devAgent) Cancel(_ context.Context, p acp.CancelNotification) error {
	a.mu.Lock()
	t := a.sessions[p.SessionId]
	a.mu.Unlock()
	if t != nil {
		t.cancel()
	}
	return nil
}

// stream sends each chunk of the turn as one session/update, paced by the
// agent's rate and held while the runtime is paused, and keeps what it said
// for session/load.
func (a *devAgent) stream(ctx context.Context, id acp.SessionId, sp *spoken) error {
	c, chunks := a.conversation(id), sp.plan
	var tick <-chan time.Time
	if a.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / a.rate))
		defer t.Stop()
		tick = t.C
	}
	for i := range chunks.n {
		if tick != nil && i > 0 {
			select {
			case <-tick:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		select {
		case <-a.pause.wait(i):
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.say(ctx, a.conn, id, sp, i); err != nil {
			return err
		}
	}
	return nil
}

// HandleExtensionMethod answers EchoMethod with its params.
func (a *devAgent) HandleExtensionMethod(_ context.Context, method string, params json.RawMessage) (any, error) {
	if method != EchoMethod {
		return nil, acp.NewMethodNotFound(method)
	}
	if len(params) == 0 {
		return json.RawMessage("null"), nil
	}
	return params, nil
}

// The rest of acp.Agent: the dev agent has no authentication, modes, config
// options, or session listing, and says so rather than pretending.

func (a *devAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *devAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *devAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *devAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *devAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *devAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// chunkPlan is a turn's answer: n chunks whose text is computed on demand, so
// `count 100000` costs no memory up front.
type chunkPlan struct {
	n    int
	text func(i int) string
}

var errCommand = errors.New("bad command")

// plan turns a prompt into the chunks that answer it; see the package doc.
func plan(prompt string) (chunkPlan, error) {
	f := strings.Fields(prompt)
	if len(f) == 1 && f[0] == "ping" {
		return chunkPlan{n: 1, text: func(int) string { return "pong" }}, nil
	}
	if n, size, ok, err := parseCount(f); ok || err != nil {
		return chunkPlan{n: n, text: func(i int) string { return countChunk(i+1, size) }}, err
	}
	var echo []string
	for i, w := range f {
		if i > 0 {
			w = " " + w
		}
		echo = appendSplit(echo, w, MaxEchoChunk)
	}
	return chunkPlan{n: len(echo), text: func(i int) string { return echo[i] }}, nil
}

// appendSplit appends s to chunks in pieces of at most max bytes, cut only
// between UTF-8 sequences.
func appendSplit(chunks []string, s string, max int) []string {
	for len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		chunks, s = append(chunks, s[:cut]), s[cut:]
	}
	return append(chunks, s)
}

// parseCount recognises "count N" and "count N size S". ok is false for any
// other prompt, which is then echoed; err reports numbers out of range.
func parseCount(f []string) (n, size int, ok bool, err error) {
	if (len(f) != 2 && len(f) != 4) || f[0] != "count" {
		return 0, 0, false, nil
	}
	n, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, false, nil
	}
	if len(f) == 4 {
		if f[2] != "size" {
			return 0, 0, false, nil
		}
		if size, err = strconv.Atoi(f[3]); err != nil {
			return 0, 0, false, nil
		}
	}
	if n < 0 || n > MaxCount || size < 0 || size > MaxChunkSize {
		return 0, 0, true, errCommand
	}
	return n, size, true, nil
}

// countChunk is chunk i of a count: "i\n", or padded with 'x' to size bytes
// ("i xxxx…\n") when a size was asked for.
func countChunk(i, size int) string {
	s := strconv.Itoa(i)
	if pad := size - len(s) - 2; pad > 0 {
		return s + " " + strings.Repeat("x", pad) + "\n"
	}
	return s + "\n"
}

// promptText joins the prompt's text blocks; other block kinds carry nothing
// the dev agent answers.
func promptText(blocks []acp.ContentBlock) string {
	var b strings.Builder
	for _, c := range blocks {
		if c.Text != nil {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c.Text.Text)
		}
	}
	return b.String()
}
