package hresult

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
)

// Decode decodes an HCS JSON document into v (a pointer to a schema2 type) strictly, as
// HCS validates documents against its schema: malformed JSON, a field the schema does not have
// (names match exactly, as in the schema reference) or a value of the wrong JSON type fail
// with HCS_E_INVALID_JSON; a number that does not fit its field (negative, fractional or too
// large) fails with E_INVALIDARG. The message names the field by its path, for instance
// "Container.Storage.Pathx: unknown field". what names the document in messages.
func Decode(doc string, v any, what string) error {
	if strings.TrimSpace(doc) == "" {
		return Errorf(computecore.HCS_E_INVALID_JSON, "%s: the document is empty", what)
	}
	d := json.NewDecoder(strings.NewReader(doc))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return Errorf(computecore.HCS_E_INVALID_JSON, "%s: malformed JSON: %v", what, err)
	}
	if d.More() {
		return Errorf(computecore.HCS_E_INVALID_JSON, "%s: malformed JSON: data after the document", what)
	}
	if err := CheckShape("", raw, reflect.TypeOf(v).Elem()); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return Errorf(computecore.HCS_E_INVALID_JSON, "%s: %v", what, err)
	}
	return nil
}

// DecodeOptional is Decode for documents HCS lets the caller omit (options, queries):
// an empty string leaves v as it is.
func DecodeOptional(doc string, v any, what string) error {
	if strings.TrimSpace(doc) == "" {
		return nil
	}
	return Decode(doc, v, what)
}

var (
	timeType       = reflect.TypeOf(time.Time{})
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
)

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// CheckShape walks a decoded JSON value (json.Number for numbers) against the Go type it is to
// be decoded into, failing as Decode does; p is the value's field path ("" for the document).
func CheckShape(p string, v any, t reflect.Type) error {
	name := p
	if name == "" {
		name = "the document"
	}
	if v == nil {
		return nil // null leaves a field unset, as HCS treats it
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrongType := func(want string) error {
		return Errorf(computecore.HCS_E_INVALID_JSON, "%s: expected %s, got %s", name, want, jsonKind(v))
	}
	switch {
	case t == timeType:
		s, ok := v.(string)
		if !ok {
			return wrongType("a date-time string")
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return Errorf(computecore.HCS_E_INVALID_JSON, "%s: %q is not an RFC 3339 date-time", name, s)
		}
		return nil
	case t.Kind() == reflect.Interface, t == rawMessageType:
		return nil // free-form (Settings, HostedSystem, HCN policy settings): checked where it is used
	case t.Kind() == reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongType("an object")
		}
		fields := jsonFields(t)
		for k, fv := range obj {
			f, ok := fields[k]
			if !ok {
				return Errorf(computecore.HCS_E_INVALID_JSON, "%s: unknown field", fieldPath(p, k))
			}
			if err := CheckShape(fieldPath(p, k), fv, f.Type); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return wrongType("an object")
		}
		for k, fv := range obj {
			if err := CheckShape(fieldPath(p, k), fv, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		if _, ok := v.(string); !ok {
			return wrongType("a base64 string")
		}
		return nil
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return wrongType("an array")
		}
		if t.Kind() == reflect.Array && len(arr) > t.Len() {
			return Errorf(computecore.E_INVALIDARG, "%s: %d elements, at most %d", name, len(arr), t.Len())
		}
		for i, e := range arr {
			if err := CheckShape(fmt.Sprintf("%s[%d]", p, i), e, t.Elem()); err != nil {
				return err
			}
		}
		return nil
	case t.Kind() == reflect.String:
		if _, ok := v.(string); !ok {
			return wrongType("a string")
		}
		return nil
	case t.Kind() == reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType("a boolean")
		}
		return nil
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType("a number")
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return Errorf(computecore.E_INVALIDARG, "%s: %s is not an integer in [%d, %d]", name, n,
				int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
		}
		return nil
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType("a number")
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return Errorf(computecore.E_INVALIDARG, "%s: %s is not an integer in [0, %d]", name, n,
				uint64(math.MaxUint64)>>(64-t.Bits()))
		}
		return nil
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return wrongType("a number")
		}
		return nil
	}
	return Errorf(computecore.HCS_E_INVALID_JSON, "%s: cannot check a field of Go type %s", name, t)
}

// jsonFields maps a struct's JSON field names to its fields (embedded structs flattened).
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					m[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f
	}
	return m
}

// FieldNames lists the JSON field names of struct type t, as Decode accepts them.
func FieldNames(t reflect.Type) []string {
	var names []string
	for k := range jsonFields(t) {
		names = append(names, k)
	}
	return names
}
