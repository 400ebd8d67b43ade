package pgcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ephemeralRange is where Linux keeps the range it takes outgoing
// connections' local ports (and port 0 listeners) from.
const ephemeralRange = "/proc/sys/net/ipv4/ip_local_port_range"

// reservedSpan is how many ports below the ephemeral range FreePorts picks
// from: 12,000 by default, narrower where the range starts low.
const reservedSpan = 12000

// lowestPicked is the lowest port FreePorts picks, above the ports common
// services listen on (5432, 6379, 7233, 8080, 9090...).
const lowestPicked = 10000

// FreePort returns a free TCP port on 127.0.0.1 (see FreePorts).
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1, holding each
// open until all are chosen so none is handed out twice.
//
// A port is free only until its owner binds it. A port the kernel hands out
// for port 0 lies in the ephemeral range, which every outgoing connection on
// the machine (another test's database or HTTP client) also takes its local
// port from, so it can be taken in that window; CI saw the embedded Temporal
// server fail to bind one. On Linux FreePorts therefore picks random ports
// just below the ephemeral range, which only a listener binding that very
// port can take; elsewhere it asks the kernel.
func FreePorts(n int) ([]int, error) {
	lo, hi, ok := belowEphemeral()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if ok && tries < 64*n {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: try another
			}
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// belowEphemeral is the range [lo, hi) FreePorts picks from, or !ok when the
// ephemeral range is unknown or starts too low to leave one.
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile(ephemeralRange)
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, false
	}
	hi, err = strconv.Atoi(fields[0])
	if err != nil {
		return 0, 0, false
	}
	lo = max(hi-reservedSpan, lowestPicked)
	return lo, hi, hi-lo >= 1000
}
