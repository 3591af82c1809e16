package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
)

// axNode is what the test reads of an accessibility-tree node.
type axNode struct {
	role, name string
	props      map[string]string
}

// axTree reads Chromium's accessibility tree of the tab, without ignored
// nodes: what a screen reader is given.
func axTree(tb *tab) []axNode {
	tb.t.Helper()
	var nodes []*accessibility.Node
	tb.run(chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		nodes, err = accessibility.GetFullAXTree().Do(ctx)
		return err
	}))
	var out []axNode
	for _, n := range nodes {
		if n.Ignored {
			continue
		}
		a := axNode{role: axString(n.Role), name: axString(n.Name), props: map[string]string{}}
		for _, p := range n.Properties {
			a.props[string(p.Name)] = axString(p.Value)
		}
		out = append(out, a)
	}
	return out
}

func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Value, &s) == nil {
		return s
	}
	return string(v.Value)
}

// The page as a screen reader gets it: every control has a name, the
// conversation is a polite live log, the connection state a status, and an
// answer being streamed is marked busy (so it is read once it is whole, not
// chunk by chunk).
func TestAccessibility(t *testing.T) {
	t.Parallel()
	skipUnless(t, "accessibility tree")
	s := startStack(t, 20)
	tb := openChat(t, newBrowser(t), "tab", s.PageURL())
	tb.prompt("count 200")
	tb.waitFor("the answer to be under way", lastAgentChunks+" >= 3")

	tree := axTree(tb)
	has := func(role, name string) bool {
		return slices.ContainsFunc(tree, func(n axNode) bool { return n.role == role && n.name == name })
	}
	for _, n := range tree {
		switch n.role {
		case "button", "textbox", "image", "log", "status", "alert":
			if n.name == "" && n.role != "status" && n.role != "alert" {
				t.Errorf("a %s has no accessible name", n.role)
			}
		}
	}
	for _, want := range [][2]string{
		{"textbox", "Message to the agent"},
		{"button", "Send"},
		{"button", "Stop the answer"},
		{"log", "Conversation"},
		{"image", "The agent is answering"},
	} {
		if !has(want[0], want[1]) {
			t.Errorf("no %s named %q in the accessibility tree", want[0], want[1])
		}
	}
	var log, status, busy bool
	for _, n := range tree {
		switch {
		case n.role == "log" && n.props["live"] == "polite":
			log = true
		case n.role == "status" && n.props["live"] == "polite":
			status = true
		case n.role == "listitem" && (n.props["busy"] == "true" || n.props["busy"] == "1"):
			busy = true
		}
	}
	if !log || !status || !busy {
		t.Errorf("polite live log: %v, polite live status: %v, streaming answer marked busy: %v; want all", log, status, busy)
	}
}
