package serve_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/api"
)

type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadDoc(t *testing.T, data []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q", doc.OpenAPI)
	}
	return doc
}

// TestOpenAPIMatchesRoutes: every route the server registers is in the
// document, and every operation of the document is a route; the daemon
// serves the committed document.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	d := newDaemon(t, nil)
	doc := loadDoc(t, serve.OpenAPI)
	var documented []string
	for p, item := range doc.Paths {
		for m := range item {
			if m == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(m)+" "+p)
		}
	}
	routes := d.srv.Routes()
	sort.Strings(documented)
	sort.Strings(routes)
	for _, r := range routes {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(routes, r) {
			t.Errorf("openapi.json documents %s, which the server does not have", r)
		}
	}
	served, err := d.admin.WithToken("").OpenAPI(ctxT(t))
	if err != nil || string(served) != string(serve.OpenAPI) {
		t.Errorf("GET /v1/openapi.json: %d bytes, %v", len(served), err)
	}
	// Every $ref resolves.
	var all any
	_ = json.Unmarshal(serve.OpenAPI, &all)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !refExists(all, ref) {
					t.Errorf("$ref %s does not resolve", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(all)
}

func refExists(doc any, ref string) bool {
	cur := doc
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// TestOpenAPIMatchesTypes: the schemas have exactly the JSON fields of the
// serve/api types the server and the Go client use.
func TestOpenAPIMatchesTypes(t *testing.T) {
	doc := loadDoc(t, serve.OpenAPI)
	types := map[string]any{
		"Error": api.Error{}, "ErrorBody": api.ErrorBody{}, "Health": api.Health{},
		"CreateWorkspace": api.CreateWorkspace{}, "Backend": api.Backend{}, "Workspace": api.Workspace{}, "WorkspaceList": api.WorkspaceList{},
		"CreateToken": api.CreateToken{}, "Token": api.Token{}, "TokenList": api.TokenList{},
		"ExecRequest": api.ExecRequest{}, "Changes": api.Changes{}, "ExecResult": api.ExecResult{},
		"StreamEvent": api.StreamEvent{}, "Job": api.Job{}, "JobList": api.JobList{}, "JobOutput": api.JobOutput{},
		"FileInfo": api.FileInfo{}, "NumberedRead": api.NumberedRead{}, "WriteResult": api.WriteResult{},
		"Exists": api.Exists{}, "Listing": api.Listing{}, "Mkdir": api.Mkdir{}, "Edit": api.Edit{},
		"EditResult": api.EditResult{}, "FromTo": api.FromTo{}, "Glob": api.Glob{}, "GlobResult": api.GlobResult{},
		"Grep": api.Grep{}, "GrepMatch": api.GrepMatch{}, "GrepResult": api.GrepResult{},
		"SaveSnapshot": api.SaveSnapshot{}, "Snapshot": api.Snapshot{}, "SnapshotList": api.SnapshotList{},
		"Restore": api.Restore{}, "RestoreResult": api.RestoreResult{}, "Diff": api.Diff{},
		"HistoryChange": api.HistoryChange{}, "DiffResult": api.DiffResult{}, "Fork": api.Fork{},
		"Branch": api.Branch{}, "BranchList": api.BranchList{}, "VirtualDiff": api.VirtualDiff{},
		"VirtualChange": api.VirtualChange{}, "VirtualDiffResult": api.VirtualDiffResult{},
		"VirtualCommit": api.VirtualCommit{}, "VirtualCommitResult": api.VirtualCommitResult{},
		"VirtualDiscard": api.VirtualDiscard{}, "VirtualDiscardResult": api.VirtualDiscardResult{},
		"ChangeEvent": api.ChangeEvent{}, "ChangeEnd": api.ChangeEnd{},
	}
	// Every struct of serve/api is listed above.
	f, err := parser.ParseFile(token.NewFileSet(), "api/api.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range f.Decls {
		if gd, ok := decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && types[ts.Name.Name] == nil {
					t.Errorf("api.%s is not checked against openapi.json: add it to TestOpenAPIMatchesTypes", ts.Name.Name)
				}
			}
		}
	}
	for name, v := range types {
		sch, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s missing", name)
			continue
		}
		var fields []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			fields = append(fields, tag)
		}
		var props []string
		for p := range sch.Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		if !slices.Equal(fields, props) {
			t.Errorf("schema %s has %v, api.%s has %v", name, props, rt.Name(), fields)
		}
	}
}
