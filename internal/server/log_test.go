package server

import (
	"encoding/json"
	"log/slog"
)

func nopLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
