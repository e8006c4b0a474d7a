package console

import "testing"

// A code that wraps does so after its separators first, escaped, without
// a character added or lost.
func TestBreakable(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "",
		"SCORER_DOWN":          "SCORER_<wbr>DOWN",
		"destination_http_503": "destination_<wbr>http_<wbr>503",
		"relais-push@vm:5807":  "relais-<wbr>push@<wbr>vm:<wbr>5807",
		"crm.sync_":            "crm.<wbr>sync_",
		"a<b>&c_d":             "a&lt;b&gt;&amp;c_<wbr>d",
		"é_à":                  "é_<wbr>à",
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
