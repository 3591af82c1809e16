//go:build race

package librelay

// raceEnabled reports a -race build, under which a frame of MaxFrameBytes
// scanned byte by byte takes seconds (skipUnderRace).
const raceEnabled = true
