package usage

import (
	"reflect"
	"testing"
)

// add sums through fields(), so fields() must list every counter of both
// types: one left out would be neither summed nor written to Redis.
func TestAddSumsEveryCounter(t *testing.T) {
	ones := func(v reflect.Value) {
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Int64 {
				f.SetInt(1)
			}
		}
	}
	var c, o Counters
	ones(reflect.ValueOf(&o).Elem())
	var m ModelCounters
	ones(reflect.ValueOf(&m).Elem())
	o.ByModel = map[string]ModelCounters{"gpt": m}
	c.add(o)
	c.add(o)
	check := func(name string, v reflect.Value) {
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Int64 && f.Int() != 2 {
				t.Errorf("%s.%s = %d after adding 1 twice, want 2", name, v.Type().Field(i).Name, f.Int())
			}
		}
	}
	check("Counters", reflect.ValueOf(c))
	check("ModelCounters", reflect.ValueOf(c.ByModel["gpt"]))
}
