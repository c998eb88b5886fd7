package config

import (
	"slices"
	"strings"
)

// Suggest is the name in known that a mistyped name most likely meant, for a "did you mean" hint: the
// nearest within two edits (a letter added, dropped or changed), or a name that one is a prefix of the
// other and shares four letters or more with it ("max-model-length" for max-model-len); "" when none
// is that near. Ties go to the first in sorted order, so the hint does not depend on map order.
func Suggest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range slices.Sorted(slices.Values(known)) {
		d := editDistance(name, k)
		if short := min(len(name), len(k)); d > 2 && short >= 4 && (strings.HasPrefix(name, k) || strings.HasPrefix(k, name)) {
			d = 2
		}
		if d < bestD && k != name {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes (flag names are ASCII).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is Suggest as the end of an error message: ` (did you mean "KEY"?)`, or "".
func didYouMean(name string, known []string) string {
	if s := Suggest(name, known); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}
