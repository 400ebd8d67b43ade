package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"hookrelay/outbox"
	"hookrelay/store"
)

// Bounds of API input.
const (
	// MaxNameLength bounds an app's name.
	MaxNameLength = 256
	// MaxDescriptionLength bounds an endpoint's description.
	MaxDescriptionLength = 1024
	// MaxURLLength bounds an endpoint's URL.
	MaxURLLength = 2048
	// PageLimitDefault and MaxPageLimit bound a list page (?limit=).
	PageLimitDefault = 50
	MaxPageLimit     = 250
	// MaxRateLimit bounds an endpoint's rate_limit (deliveries per second).
	MaxRateLimit = 10000
	// MaxMaxInFlight bounds an endpoint's max_in_flight.
	MaxMaxInFlight = 1000
	// MinRetention and MaxRetention bound an app's retention override.
	MinRetention = time.Hour
	MaxRetention = 10 * 365 * 24 * time.Hour
	// MaxEventDeliveries bounds the deliveries listed with an event.
	MaxEventDeliveries = 1000
	// StatsLastDefault and MaxStatsLast bound the events stats cover (?last=).
	StatsLastDefault = 1000
	MaxStatsLast     = 100000
)

// maxBody bounds every request body; events are further bounded by
// outbox.MaxPayloadBytes.
const maxBody = outbox.MaxPayloadBytes + 16<<10

// readBody reads at most maxBody bytes of the request body.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			problem(c, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes (event payload limit %d bytes)", maxBody, outbox.MaxPayloadBytes))
			return nil, false
		}
		problem(c, http.StatusBadRequest, "could not read request body")
		return nil, false
	}
	return body, true
}

// bind decodes a JSON body strictly into dst; it answers and returns false
// on any error, naming the field at fault.
func bind(c *gin.Context, dst any) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if p := decodeStrict(body, dst); p != nil {
		problem(c, p.Status, p.Detail, p.Fields...)
		return false
	}
	return true
}

// decodeStrict decodes exactly one JSON object into dst (a pointer to a
// struct with json tags), field by field, so the field at fault is known
// without reading encoding/json's messages: an unknown field, a value of
// the wrong kind or a time that is not RFC 3339 each name it.
func decodeStrict(body []byte, dst any) *Problem {
	bad := func(status int, detail string, fields ...string) *Problem {
		return &Problem{Status: status, Detail: detail, Fields: fields}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return bad(http.StatusBadRequest, "request body is not valid JSON")
	}
	if dec.More() {
		return bad(http.StatusBadRequest, "request body has trailing data after the JSON value")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return bad(http.StatusUnprocessableEntity, "request body must be a JSON object", "body")
	}
	v := reflect.ValueOf(dst).Elem()
	byName := map[string]reflect.Value{}
	for i := range v.NumField() {
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			byName[name] = v.Field(i)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		f, ok := byName[name]
		if !ok {
			return bad(http.StatusUnprocessableEntity, "unknown field "+name, name)
		}
		// encoding/json would replace invalid UTF-8 in a string silently;
		// checked on the field's own bytes.
		if !utf8.Valid(fields[name]) {
			return bad(http.StatusUnprocessableEntity, name+" must be valid UTF-8", name)
		}
		err := json.Unmarshal(fields[name], f.Addr().Interface())
		var typeErr *json.UnmarshalTypeError
		switch {
		case err == nil:
		case f.Type() == reflect.TypeFor[time.Time]() || f.Type() == reflect.TypeFor[*time.Time]():
			return bad(http.StatusUnprocessableEntity, name+" must be an RFC 3339 time", name)
		case errors.As(err, &typeErr):
			return bad(http.StatusUnprocessableEntity, fmt.Sprintf("%s must be %s", name, jsonKind(typeErr.Type.Kind())), name)
		default:
			return bad(http.StatusUnprocessableEntity, name+" is not valid", name)
		}
	}
	return nil
}

// jsonKind names the JSON kind a Go kind decodes from.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "a number"
	}
}

// page reads ?limit=&cursor=. A cursor that no list could have given
// (not UTF-8, or with a NUL, which Postgres text cannot hold) is a 422.
func page(c *gin.Context) (store.Page, bool) {
	p := store.Page{Limit: PageLimitDefault, Cursor: c.Query("cursor")}
	if !utf8.ValidString(p.Cursor) || strings.ContainsRune(p.Cursor, 0) {
		problem(c, http.StatusUnprocessableEntity, "cursor must be a next_cursor a list answered", "cursor")
		return p, false
	}
	if l := c.Query("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxPageLimit {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("limit must be an integer from 1 to %d", MaxPageLimit), "limit")
			return p, false
		}
		p.Limit = n
	}
	return p, true
}

// list answers {"data": [...], "next_cursor": ...}.
// appPage is page for a list under an app, answering 404 (and false) when
// the app does not exist.
func (s *Server) appPage(c *gin.Context) (store.Page, bool) {
	p, ok := page(c)
	if !ok {
		return p, false
	}
	if _, err := s.store.GetApp(c.Request.Context(), c.Param("app")); err != nil {
		s.fail(c, err)
		return p, false
	}
	return p, true
}

func list[T any](c *gin.Context, p store.Page, items []T, id func(T) string) {
	var next *string
	if len(items) == p.Limit && len(items) > 0 {
		n := id(items[len(items)-1])
		next = &n
	}
	if items == nil {
		items = []T{}
	}
	c.JSON(http.StatusOK, gin.H{"data": items, "next_cursor": next})
}

// rangeQuery reads a list's ?limit=&cursor= and ?since=&until=, answering
// and reporting false on the first bad one.
func rangeQuery(c *gin.Context) (p store.Page, since, until time.Time, ok bool) {
	if p, ok = page(c); !ok {
		return p, since, until, false
	}
	if since, ok = timeQuery(c, "since"); !ok {
		return p, since, until, false
	}
	until, ok = timeQuery(c, "until")
	return p, since, until, ok
}

func timeQuery(c *gin.Context, name string) (time.Time, bool) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		problem(c, http.StatusUnprocessableEntity, name+" must be an RFC 3339 time", name)
		return time.Time{}, false
	}
	return t, true
}
