package config

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// Setting describes one setting: its flag, its environment variable, its
// default (as --help and docs/operations.md show it) and what it is for.
type Setting struct {
	Flag, Env, Default, Usage string
	// Commands are the commands that read it; it is a flag of those only.
	Commands []string
}

// builder registers settings on a flag set and records each one.
type builder struct {
	fs       *flag.FlagSet
	getenv   func(string) string
	errs     []string
	settings []Setting
	// shown overrides how an empty default is shown, by flag name.
	shown map[string]string
	// cmd is the command whose flags are registered ("" lists every
	// setting); scope lists the commands of the settings added now.
	cmd   string
	scope []string
}

// uses sets the commands that read the settings added next.
func (b *builder) uses(cmds ...string) { b.scope = cmds }

// active reports whether the setting being added is the command's: only
// those become flags and read the environment; the others keep their
// defaults.
func (b *builder) active() bool { return b.cmd != "" && slices.Contains(b.scope, b.cmd) }

func (b *builder) add(name, env, def, usage string) {
	if def == "" {
		def = b.shown[name]
	} else {
		def = "`" + def + "`"
	}
	b.settings = append(b.settings, Setting{Flag: "--" + name, Env: env, Default: def, Usage: usage, Commands: b.scope})
}

// The flag methods register a flag whose default is the code's (the
// usage, printed on -h and on any flag error, never shows a value from the
// environment, which may be a secret), then apply the environment.

func (b *builder) str(p *string, name, env, def, usage string) {
	b.add(name, env, def, usage)
	*p = def
	if b.active() {
		b.fs.StringVar(p, name, def, usage+" (env "+env+")")
		*p = or(b.getenv(env), def)
	}
}

// fromEnv is env's value parsed, or def when env is unset; a value that
// does not parse is recorded as an error (want says what it should be).
func fromEnv[T any](b *builder, env string, def T, parse func(string) (T, error), want string) T {
	s := b.getenv(env)
	if s == "" {
		return def
	}
	v, err := parse(s)
	if err != nil {
		b.errs = append(b.errs, fmt.Sprintf("%s=%q: want %s", env, s, want))
		return def
	}
	return v
}

func (b *builder) num(p *int, name, env string, def int, usage string) {
	b.add(name, env, strconv.Itoa(def), usage)
	*p = def
	if b.active() {
		b.fs.IntVar(p, name, def, usage+" (env "+env+")")
		*p = fromEnv(b, env, def, strconv.Atoi, "an integer")
	}
}

func (b *builder) boolean(p *bool, name, env string, def bool, usage string) {
	b.add(name, env, strconv.FormatBool(def), usage)
	*p = def
	if b.active() {
		b.fs.BoolVar(p, name, def, usage+" (env "+env+")")
		*p = fromEnv(b, env, def, strconv.ParseBool, "a boolean")
	}
}

// prefixes registers a comma-separated CIDR list (none by default).
func (b *builder) prefixes(p *[]netip.Prefix, name, env, usage string) {
	b.add(name, env, "", usage)
	if !b.active() {
		return
	}
	*p = fromEnv(b, env, nil, ParseTrustedProxies, "comma-separated CIDRs")
	b.fs.Func(name, usage+" (env "+env+")", func(s string) error {
		v, err := ParseTrustedProxies(s)
		if err == nil {
			*p = v
		}
		return err
	})
}

func (b *builder) duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	positive := func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err == nil && d <= 0 {
			err = errors.New("not positive")
		}
		return d, err
	}
	b.add(name, env, def.String(), usage)
	*p = def
	if b.active() {
		b.fs.DurationVar(p, name, def, usage+" (env "+env+")")
		*p = fromEnv(b, env, def, positive, "a positive Go duration")
	}
}
