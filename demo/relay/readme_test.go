package relay_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relaywasm/relaywasm/librelay/relayleg"
)

// The README's limits table says what the relay does at each limit; every
// close code a row names must be the close code of a reason the same row
// names (an oversized hello closes 4413 frame_too_large, not 4400).
func TestReadmeLimitsTableCloseCodes(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Skip("no README beside the module: ", err)
	}
	_, table, ok := strings.Cut(string(readme), "| limit | default | at the limit |")
	if !ok {
		t.Fatal("no limits table in the README")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	closeRe := regexp.MustCompile(`close (\d{4})`)
	reasonRe := regexp.MustCompile("`(?:relay\\.error )?([a-z_]+)`")
	rows := 0
	for row := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(row, "| ") || strings.HasPrefix(row, "|---") {
			continue
		}
		rows++
		named := map[relayleg.CloseCode]bool{}
		for _, m := range reasonRe.FindAllStringSubmatch(row, -1) {
			named[relayleg.CloseFor(m[1])] = true
		}
		for _, m := range closeRe.FindAllStringSubmatch(row, -1) {
			code, _ := strconv.Atoi(m[1])
			if !named[relayleg.CloseCode(code)] {
				t.Errorf("the row %q closes %d without naming its reason (%s)", row, code, relayleg.CloseCode(code).Reason())
			}
		}
	}
	if rows < 5 {
		t.Fatalf("only %d rows in the limits table", rows)
	}
}
