package console

import "testing"

// A code that wraps does so after its separators first, escaped, without
// a character added or lost.
func TestBreakable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "",
		"destination_http_503": "destination_<wbr>http_<wbr>503",
		"relais-push@vm:58071": "relais-<wbr>push@<wbr>vm:<wbr>58071",
		"crm.sync_companies":   "crm.<wbr>sync_<wbr>companies",
		"a<b>&c_d<e>&f_g<h>":   "a&lt;b&gt;&amp;c_<wbr>d&lt;e&gt;&amp;f_<wbr>g&lt;h&gt;",
		"é_à_é_à_é_à_é_à":      "é_<wbr>à_<wbr>é_<wbr>à_<wbr>é_<wbr>à_<wbr>é_<wbr>à",
		// A short code is never broken (operator QA: charge_|card read
		// as two words in a laptop's squeezed column).
		"charge_card":     "charge_card",
		"SCORER_DOWN":     "SCORER_DOWN",
		"a<b>&c_d":        "a&lt;b&gt;&amp;c_d",
		"payments.refund": "payments.<wbr>refund",
		// A long piece may break anywhere; a short one never.
		"charge_card_ABCDEFGHIJKLMNOPQRSTUVWXYZ": `charge_<wbr>card_<wbr><span class="long">ABCDEFGHIJKLMNOPQRSTUVWXYZ</span>`,
	} {
		if got := breakable(in); got != want {
			t.Errorf("breakable(%q) = %q, want %q", in, got, want)
		}
	}
}

// A value longer than clipRunes shows its start and an ellipsis; a shorter
// one shows whole.
func TestClipStart(t *testing.T) {
	t.Parallel()
	short := "order-1001"
	if got, cut := clipStart(short); cut || got != short {
		t.Errorf("clipStart(%q) = %q, %v; want it whole", short, got, cut)
	}
	long := ""
	for range clipRunes + 1 {
		long += "é"
	}
	got, cut := clipStart(long)
	if !cut || []rune(got)[len([]rune(got))-1] != '…' || len([]rune(got)) >= clipRunes {
		t.Errorf("clipStart of %d runes = %q, %v; want its start and an ellipsis", clipRunes+1, got, cut)
	}
}
