package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/corralhq/corral/internal/server"
)

// The tenants and keys subcommands drive a running gateway's admin API,
// so they change what the API changes, with its validation and its audit
// trail: they are a client, never a second copy of the logic.
//
//	gateway tenants list|create|delete
//	gateway keys create|list|revoke

// adminClient talks to the admin API at CORRAL_ADMIN_URL with
// CORRAL_ADMIN_TOKEN.
type adminClient struct {
	base, token string
	http        *http.Client
}

func newAdminClient(environ []string) (*adminClient, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	base := strings.TrimRight(env["CORRAL_ADMIN_URL"], "/")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("CORRAL_ADMIN_URL must be the gateway's base URL, such as http://127.0.0.1:8080")
	}
	if env["CORRAL_ADMIN_TOKEN"] == "" {
		return nil, errors.New("CORRAL_ADMIN_TOKEN is empty: set it to the gateway's admin token")
	}
	return &adminClient{base: base, token: env["CORRAL_ADMIN_TOKEN"], http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// do sends one admin request and decodes a 2xx answer into out; any other
// answer becomes an error carrying the gateway's message.
func (c *adminClient) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Message, Code string }
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// newFlags is a flag set whose -h prints usage to stderr and is no error.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s\n\nCORRAL_ADMIN_URL [http://127.0.0.1:8080] is the gateway, CORRAL_ADMIN_TOKEN its admin token.\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// subcommandUsage answers an admin command called with no subcommand
// (usage and the error missing) or with -h (usage, no error); done is
// false when args name a subcommand for the caller to run.
func subcommandUsage(args []string, usage, missing string, stderr io.Writer) (done bool, err error) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "-help" && args[0] != "--help" {
		return false, nil
	}
	fmt.Fprintf(stderr, "usage: %s\n", usage)
	if len(args) == 0 {
		return true, errors.New(missing)
	}
	return true, nil
}

// connect parses a subcommand's flags from args and makes the admin
// client it will use. A nil client ends the subcommand with err: nil when
// -h printed the usage, else why the flags or the environment are wrong.
func connect(fs *flag.FlagSet, args, environ []string) (*adminClient, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil
		}
		return nil, err
	}
	return newAdminClient(environ)
}

const tenantsUsage = "gateway tenants list | create [-policy JSON] ID | delete ID"

// tenantsCmd runs gateway tenants ...
func tenantsCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if done, err := subcommandUsage(args, tenantsUsage, "tenants: a subcommand is required: list, create or delete", stderr); done {
		return err
	}
	var (
		fs     *flag.FlagSet
		policy *string
	)
	switch args[0] {
	case "list":
		fs = newFlags("gateway tenants list", "gateway tenants list", stderr)
	case "create":
		fs = newFlags("gateway tenants create", "gateway tenants create [-policy JSON] ID", stderr)
		policy = fs.String("policy", "{}", `policy fields of the tenants file as a JSON object, e.g. {"requests_per_minute":600}`)
	case "delete":
		fs = newFlags("gateway tenants delete", "gateway tenants delete ID", stderr)
	default:
		return fmt.Errorf("tenants: unknown subcommand %q (list, create, delete)", args[0])
	}
	c, err := connect(fs, args[1:], environ)
	if c == nil {
		return err
	}
	switch args[0] {
	case "list":
		var out struct {
			Tenants []struct {
				ID     string          `json:"id"`
				Source string          `json:"source"`
				Policy json.RawMessage `json:"policy"`
				Keys   []string        `json:"keys"`
			} `json:"tenants"`
		}
		if err := c.do(ctx, "GET", "/admin/tenants", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSOURCE\tKEYS\tPOLICY")
		for _, t := range out.Tenants {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.ID, t.Source, len(t.Keys), t.Policy)
		}
		return tw.Flush()
	case "create":
		id, err := oneArg(fs, "tenants create", "ID")
		if err != nil {
			return err
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(*policy), &body); err != nil || body == nil {
			return errors.New("tenants create: -policy must be a JSON object")
		}
		body["id"] = id
		if err := c.do(ctx, "POST", "/admin/tenants", body, nil); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "tenant %s created\n", id)
		return err
	default: // delete
		id, err := oneArg(fs, "tenants delete", "ID")
		if err != nil {
			return err
		}
		if err := c.do(ctx, "DELETE", "/admin/tenants/"+url.PathEscape(id), nil, nil); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "tenant %s deleted\n", id)
		return err
	}
}

const keysUsage = "gateway keys create [-name N] [-expires RFC3339|DURATION] TENANT | list TENANT | revoke TENANT KEY_ID"

// keysCmd runs gateway keys ...
func keysCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if done, err := subcommandUsage(args, keysUsage, "keys: a subcommand is required: create, list or revoke", stderr); done {
		return err
	}
	var (
		fs            *flag.FlagSet
		name, expires *string
	)
	switch args[0] {
	case "create":
		fs = newFlags("gateway keys create", "gateway keys create [-name N] [-expires T] TENANT", stderr)
		name = fs.String("name", "", "a name for the key (ci, laptop, ...)")
		expires = fs.String("expires", "", "when the key stops working: an RFC 3339 time or a duration from now (720h)")
	case "list":
		fs = newFlags("gateway keys list", "gateway keys list TENANT", stderr)
	case "revoke":
		fs = newFlags("gateway keys revoke", "gateway keys revoke TENANT KEY_ID", stderr)
	default:
		return fmt.Errorf("keys: unknown subcommand %q (create, list, revoke)", args[0])
	}
	c, err := connect(fs, args[1:], environ)
	if c == nil {
		return err
	}
	switch args[0] {
	case "create":
		id, err := oneArg(fs, "keys create", "TENANT")
		if err != nil {
			return err
		}
		body := map[string]any{}
		if *name != "" {
			body["name"] = *name
		}
		if *expires != "" {
			at, err := expiry(*expires, time.Now())
			if err != nil {
				return err
			}
			body["expires_at"] = at
		}
		var out struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		if err := c.do(ctx, "POST", "/admin/tenants/"+url.PathEscape(id)+"/keys", body, &out); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "id:  %s\nkey: %s\n\nGive the key to the tenant; it is shown only this once.\n", out.ID, out.Key)
		return err
	case "list":
		id, err := oneArg(fs, "keys list", "TENANT")
		if err != nil {
			return err
		}
		var out struct {
			Keys []server.KeyListing `json:"keys"`
		}
		if err := c.do(ctx, "GET", "/admin/tenants/"+url.PathEscape(id)+"/keys", nil, &out); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tPREFIX\tCREATED\tEXPIRES\tLAST USED")
		for _, k := range out.Keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.CreatedAt.Format(time.RFC3339), orDash(k.ExpiresAt), orDash(k.LastUsed))
		}
		return tw.Flush()
	default: // revoke
		if fs.NArg() != 2 {
			return errors.New("keys revoke: want TENANT KEY_ID")
		}
		id, keyID := fs.Arg(0), fs.Arg(1)
		if err := c.do(ctx, "DELETE", "/admin/tenants/"+url.PathEscape(id)+"/keys/"+url.PathEscape(keyID), nil, nil); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "key %s of tenant %s revoked\n", keyID, id)
		return err
	}
}

func oneArg(fs *flag.FlagSet, cmd, what string) (string, error) {
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%s: want one %s", cmd, what)
	}
	return fs.Arg(0), nil
}

// expiry reads -expires: an RFC 3339 time, or a duration from now.
func expiry(s string, now time.Time) (string, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Format(time.RFC3339), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return "", fmt.Errorf("keys create: -expires %q is neither an RFC 3339 time nor a positive duration", s)
	}
	return now.Add(d).UTC().Format(time.RFC3339), nil
}

func orDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
