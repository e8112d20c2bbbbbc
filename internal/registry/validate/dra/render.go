package dra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// upstreamValue is the bad value of an error that carries an object of
// the v1 API, rendered as upstream renders it. Upstream checks its
// internal types, which have the fields of the v1 ones but no JSON tags:
// their JSON names every field by its Go name, leaves none out, and
// inlines embedded structs.
type upstreamValue struct{ value any }

func (u upstreamValue) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeUpstream(&buf, reflect.ValueOf(u.value)); err != nil {
		return nil, fmt.Errorf("rendering %T: %w", u.value, err)
	}
	return buf.Bytes(), nil
}

// apiPackages hold the types that have internal counterparts without tags.
var apiPackages = []string{"k8s.io/api/resource/v1", "k8s.io/api/core/v1"}

func isAPIStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && slices.Contains(apiPackages, t.PkgPath())
}

func encodeUpstream(buf *bytes.Buffer, v reflect.Value) error {
	if isAPIStruct(v.Type()) {
		buf.WriteByte('{')
		if _, err := encodeFields(buf, v, true); err != nil {
			return err
		}
		buf.WriteByte('}')
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		return encodeUpstream(buf, v.Elem())
	case reflect.Slice:
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeUpstream(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case reflect.Map:
		entries := make(map[string]json.RawMessage, v.Len())
		for _, key := range v.MapKeys() {
			var value bytes.Buffer
			if err := encodeUpstream(&value, v.MapIndex(key)); err != nil {
				return err
			}
			entries[key.String()] = value.Bytes()
		}
		return encodeJSON(buf, entries)
	}
	return encodeJSON(buf, v.Interface())
}

// encodeFields writes the fields of an API struct (all exported) as
// members of an object and reports whether it wrote any; first says none
// came before.
func encodeFields(buf *bytes.Buffer, v reflect.Value, first bool) (bool, error) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Anonymous {
			wrote, err := encodeEmbedded(buf, v.Field(i), first)
			if err != nil {
				return false, err
			}
			first = first && !wrote
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		fmt.Fprintf(buf, "%q:", f.Name)
		if err := encodeUpstream(buf, v.Field(i)); err != nil {
			return false, err
		}
	}
	return !first, nil
}

// encodeEmbedded inlines an embedded struct: an API one field by field,
// any other (object metadata) as its own JSON object's members.
func encodeEmbedded(buf *bytes.Buffer, v reflect.Value, first bool) (bool, error) {
	if isAPIStruct(v.Type()) {
		return encodeFields(buf, v, first)
	}
	var object bytes.Buffer
	if err := encodeJSON(&object, v.Interface()); err != nil {
		return false, err
	}
	members := bytes.TrimSuffix(bytes.TrimPrefix(bytes.TrimSpace(object.Bytes()), []byte("{")), []byte("}"))
	if len(members) == 0 {
		return false, nil
	}
	if !first {
		buf.WriteByte(',')
	}
	buf.Write(members)
	return true, nil
}

func encodeJSON(buf *bytes.Buffer, value any) error {
	data, err := json.Marshal(value)
	if err != nil {
		return err
	}
	buf.Write(data)
	return nil
}

// String renders a value that is no valid JSON (such as opaque parameters
// that are not JSON) in Go syntax, as upstream falls back to.
func (u upstreamValue) String() string {
	return fmt.Sprintf("%#v", u.value)
}
