//go:build !race

package librelay

const raceEnabled = false
