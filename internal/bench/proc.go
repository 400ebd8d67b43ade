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
	_, secs, _ := parseStat(string(b), children)
	return secs
}

// treeCPU returns the CPU seconds of pid and all its descendants, living
// and reaped, reading every process's stat once.
func treeCPU(pid int) float64 {
	kids := map[int][]int{}
	cpu := map[int]float64{}
	matches, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		p, _ := strconv.Atoi(filepath.Base(filepath.Dir(m)))
		ppid, secs, ok := parseStat(string(b), true)
		if !ok {
			continue
		}
		kids[ppid] = append(kids[ppid], p)
		cpu[p] = secs
	}
	var sum func(int) float64
	sum = func(p int) float64 {
		total := cpu[p]
		for _, c := range kids[p] {
			total += sum(c)
		}
		return total
	}
	return sum(pid)
}

// parseStat reads a /proc/<pid>/stat line: the parent's pid and the CPU
// seconds (user+system, plus reaped children's when children is set).
func parseStat(s string, children bool) (ppid int, secs float64, ok bool) {
	// Fields after the command (which may contain spaces) start at ") ".
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 15 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	// f[11]=utime f[12]=stime f[13]=cutime f[14]=cstime (fields 14–17).
	last := 12
	if children {
		last = 14
	}
	for k := 11; k <= last; k++ {
		v, _ := strconv.ParseFloat(f[k], 64)
		secs += v
	}
	return ppid, secs / clockTicks, true
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

// stackCPU starts a reading of the CPU this process and the Postgres
// server of pid pgPID (0: none) use; the function it returns says how much
// both used since, and Postgres's part, in seconds. The /proc walk for
// Postgres's processes stays outside this process's measured window: walk,
// then read our own CPU; at the end, the reverse.
func stackCPU(pgPID int) (since func() (total, postgres float64)) {
	pid := os.Getpid()
	pg0 := treeCPU(pgPID)
	own0 := cpuSeconds(pid, false)
	return func() (float64, float64) {
		own := cpuSeconds(pid, false) - own0
		pg := treeCPU(pgPID) - pg0
		return own + pg, pg
	}
}

// pgPID is the PID of the stack's Postgres server, 0 when it has none.
func (b *runner) pgPID() int {
	if b.stack.PG == nil {
		return 0
	}
	return b.stack.PG.PID()
}
