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
	"hookrelay/service"
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

// pageQuery reads ?limit=&cursor= for the service, which checks them; a
// limit that is not a positive integer asks for an invalid page.
func pageQuery(c *gin.Context) service.Page {
	return service.Page{Limit: intQuery(c, "limit"), Cursor: c.Query("cursor")}
}

// intQuery reads an optional positive integer from the query: 0 when
// absent, -1 (out of every bound) when it is not a positive integer.
func intQuery(c *gin.Context, name string) int {
	v := c.Query(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return -1
	}
	return n
}

// rangeQuery reads a list's ?since=&until=, answering and reporting false
// on the first bad one.
func rangeQuery(c *gin.Context) (since, until time.Time, ok bool) {
	if since, ok = timeQuery(c, "since"); !ok {
		return since, until, false
	}
	until, ok = timeQuery(c, "until")
	return since, until, ok
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
