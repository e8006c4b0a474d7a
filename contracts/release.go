package contracts

import (
	"fmt"
	"regexp"
)

// MaxReleaseNotes bounds a release's notes, in bytes.
const MaxReleaseNotes = 10_000

var releaseName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ReleaseProblems lists what is wrong with a release's name and notes, at
// their pointers (/name, /notes): the server refuses such a release, and
// relais apply's dry run must refuse it too, before anything is written (a
// release is named once, forever).
func ReleaseProblems(name, notes string) []Violation {
	var vs []Violation
	if !releaseName.MatchString(name) {
		vs = append(vs, Violation{Path: "/name", Message: "must be 1 to 64 letters, digits, dots, dashes or underscores, starting with a letter or digit"})
	}
	if len(notes) > MaxReleaseNotes {
		vs = append(vs, Violation{Path: "/notes", Message: fmt.Sprintf("is longer than %d bytes", MaxReleaseNotes)})
	}
	return vs
}
