package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on Linux).
const clockTicks = 100

// cpuSeconds returns the CPU time of pid: user+system, plus its reaped
// children's when children is true.
func cpuSeconds(pid int, children bool) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command (which may contain spaces) start at ") ".
	s := string(b)
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+2:])
	// f[11]=utime f[12]=stime f[13]=cutime f[14]=cstime (fields 14–17).
	var total float64
	last := 12
	if children {
		last = 14
	}
	for k := 11; k <= last && k < len(f); k++ {
		v, _ := strconv.ParseFloat(f[k], 64)
		total += v
	}
	return total / clockTicks
}

// treeCPU returns the CPU seconds of pid and all its descendants, living
// and reaped.
func treeCPU(pid int) float64 {
	total := cpuSeconds(pid, true)
	for _, child := range children(pid) {
		total += treeCPU(child)
	}
	return total
}

func children(pid int) []int {
	matches, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndex(s, ") ")
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			c, _ := strconv.Atoi(filepath.Base(filepath.Dir(m)))
			out = append(out, c)
		}
	}
	return out
}

// rssKB returns VmHWM (peak RSS) of pid in KiB.
func peakRSSKB(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	return 0
}
