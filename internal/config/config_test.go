package config

import (
	"strings"
	"testing"
	"time"
)

func TestLoadDefaults(t *testing.T) {
	c, err := Load(nil)
	if err != nil {
		t.Fatalf("Load(empty) error: %v", err)
	}
	want := Config{
		Addr:            ":8080",
		UpstreamURL:     "https://api.openai.com/v1",
		CacheTTL:        time.Hour,
		NegativeTTL:     30 * time.Second,
		LockTTL:         10 * time.Second,
		PollInterval:    50 * time.Millisecond,
		WaitTimeout:     120 * time.Second,
		LeaderWait:      10 * time.Second,
		UpstreamTimeout: 120 * time.Second,
		MaxBodyBytes:    8 << 20,
		LogLevel:        "info",
		ShutdownTimeout: 30 * time.Second,
		DataDir:         "./corral-data",
	}
	if c != want {
		t.Errorf("Load(empty) = %+v\nwant %+v", c, want)
	}
}

func TestLoadValues(t *testing.T) {
	c, err := Load([]string{
		"CORRAL_ADDR=127.0.0.1:9000",
		"CORRAL_REDIS_URL=redis://127.0.0.1:6379/0",
		"CORRAL_CACHE_TTL=5m",
		"CORRAL_STALE_WHILE_REVALIDATE=10m",
		"CORRAL_STALE_IF_ERROR=24h",
		"CORRAL_MAX_BODY_BYTES=64KiB",
		"CORRAL_CONSOLE_SECURE_COOKIE=true",
		"OPENAI_API_KEY=sk-fallback",
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.Addr != "127.0.0.1:9000" || c.CacheTTL != 5*time.Minute || c.MaxBodyBytes != 64<<10 || c.RedisURL == "" ||
		c.StaleRevalidate != 10*time.Minute || c.StaleIfError != 24*time.Hour || !c.ConsoleSecureCookie {
		t.Errorf("Load = %+v", c)
	}
	if c.UpstreamAPIKey != "sk-fallback" {
		t.Errorf("UpstreamAPIKey = %q, want the OPENAI_API_KEY fallback", c.UpstreamAPIKey)
	}
	c, err = Load([]string{"OPENAI_API_KEY=sk-fallback", "CORRAL_UPSTREAM_API_KEY=sk-own"})
	if err != nil || c.UpstreamAPIKey != "sk-own" {
		t.Errorf("UpstreamAPIKey = %q, %v; want sk-own", c.UpstreamAPIKey, err)
	}
}

func TestLoadErrorsNameTheVariable(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"CORRAL_CACHE_TTL=soon", "CORRAL_CACHE_TTL"},
		{"CORRAL_NEGATIVE_TTL=-1s", "CORRAL_NEGATIVE_TTL"},
		{"CORRAL_MAX_BODY_BYTES=lots", "CORRAL_MAX_BODY_BYTES"},
		{"CORRAL_MAX_BODY_BYTES=0", "CORRAL_MAX_BODY_BYTES"},
		{"CORRAL_UPSTREAM_URL=ftp://x", "CORRAL_UPSTREAM_URL"},
		{"CORRAL_REDIS_URL=http://secret@x", "CORRAL_REDIS_URL"},
		{"CORRAL_LOG_LEVEL=loud", "CORRAL_LOG_LEVEL"},
		{"CORRAL_LOCK_TTL=10", "CORRAL_LOCK_TTL"},
		{"CORRAL_STALE_WHILE_REVALIDATE=-1s", "CORRAL_STALE_WHILE_REVALIDATE"},
		{"CORRAL_STALE_IF_ERROR=a-day", "CORRAL_STALE_IF_ERROR"},
		{"CORRAL_REDIS_CLUSTER=yes", "CORRAL_REDIS_CLUSTER"},
		{"CORRAL_CONSOLE_SECURE_COOKIE=on", "CORRAL_CONSOLE_SECURE_COOKIE"},
		{"CORRAL_REDIS_CLUSTER=true", "CORRAL_REDIS_URL"},
		{"CORRAL_REDIS_SENTINEL_MASTER=mymaster", "CORRAL_REDIS_URL"},
		{"CORRAL_REDIS_URL=redis://a:1\nCORRAL_REDIS_CLUSTER=true\nCORRAL_REDIS_SENTINEL_MASTER=m", "CORRAL_REDIS_SENTINEL_MASTER"},
	}
	for _, tt := range tests {
		_, err := Load(strings.Split(tt.give, "\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) error = %v; want it to name %s", tt.give, err, tt.want)
		}
	}
	_, err := Load([]string{"CORRAL_REDIS_URL=http://user:hunter2@x"})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Load(bad redis url) error = %v; want an error without the password", err)
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		give string
		want ByteSize
	}{
		{"65536", 65536},
		{"64KiB", 64 << 10},
		{"8MiB", 8 << 20},
		{"1GiB", 1 << 30},
		{"64KB", 64000},
		{"8mb", 8000000},
		{"10B", 10},
		{" 2 MiB ", 2 << 20},
	}
	for _, tt := range tests {
		var b ByteSize
		if err := b.UnmarshalText([]byte(tt.give)); err != nil || b != tt.want {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", tt.give, b, err, tt.want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5MiB", "99999999999GiB"} {
		var b ByteSize
		if err := b.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = %d; want an error", bad, b)
		}
	}
}
