package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/apierr"
)

// The command tools: execute, and background_start, background_list,
// background_output and background_kill.

const (
	// defaultTimeout is execute's timeout in seconds, as in the seeds.
	defaultTimeout = 120
	// maxWait bounds background_output's wait, in seconds.
	maxWait = 300
)

// ExecuteInput are execute's arguments.
type ExecuteInput struct {
	Command     string            `json:"command" jsonschema:"shell command line, run as sh -c COMMAND"`
	Timeout     float64           `json:"timeout,omitempty" jsonschema:"seconds after which the command and every process it started are killed (default 120)"`
	Cwd         string            `json:"cwd,omitempty" jsonschema:"working directory, relative to the workspace root (default: the root)"`
	Env         map[string]string `json:"env,omitempty" jsonschema:"environment variables added for this command"`
	Stdin       string            `json:"stdin,omitempty" jsonschema:"text given to the command on standard input (default: none)"`
	OutputLimit int64             `json:"output_limit,omitempty" jsonschema:"maximum bytes of output kept, stdout and stderr together (default 1048576); the rest is dropped and truncated is set"`
}

func (in ExecuteInput) errPath() string { return in.Cwd }

// Changes lists what a command created, modified and deleted, relative to
// the workspace root.
type Changes struct {
	Created  []string `json:"created"`
	Modified []string `json:"modified"`
	Deleted  []string `json:"deleted"`
}

// ExecuteOutput is execute's result.
type ExecuteOutput struct {
	// ExitCode is the command's exit status (128+N when killed by signal
	// N; 127: command not found).
	ExitCode int `json:"exit_code"`
	// Output is stdout and stderr interleaved as they were written.
	Output     string `json:"output"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	// Changes is nil when the workspace does not track changes.
	Changes *Changes `json:"changes,omitempty"`
}

func (o ExecuteOutput) text() string {
	var sb strings.Builder
	sb.WriteString(o.Output)
	if o.Output != "" && !strings.HasSuffix(o.Output, "\n") {
		sb.WriteString("\n")
	}
	if o.Truncated {
		sb.WriteString("[output truncated]\n")
	}
	fmt.Fprintf(&sb, "[exit code %d, %d ms]\n", o.ExitCode, o.DurationMS)
	if c := o.Changes; c != nil {
		for _, l := range []struct {
			tag   string
			paths []string
		}{{"created", c.Created}, {"modified", c.Modified}, {"deleted", c.Deleted}} {
			if len(l.paths) > 0 {
				fmt.Fprintf(&sb, "[%s: %s]\n", l.tag, strings.Join(l.paths, ", "))
			}
		}
	}
	return sb.String()
}

var executeTool = &sdk.Tool{
	Name:  "execute",
	Title: "Run a command",
	Description: `Run a shell command (sh -c) in the workspace and wait for it: returns its exit code, its output (stdout and stderr interleaved), the time it took and the paths it created, modified and deleted. A non-zero exit code is a result, not an error. Everything the command started is killed when it returns; use background_start for servers and long jobs. What it wrote is durable in the workspace's storage when the call returns.
Errors: timeout (it ran longer than timeout seconds and was killed; the message carries its output so far), not_found or path_escape (bad cwd), policy_refused (the command was refused), invalid_argument (empty command, timeout <= 0).`,
	InputSchema: inputSchema[ExecuteInput](map[string]any{"timeout": defaultTimeout, "cwd": ""}),
	Annotations: runs,
}

// request is the exec request of a command tool; timeout 0 means none.
func request(command, cwd string, env map[string]string, stdin string, timeout float64, limit int64) (exec.Request, error) {
	if timeout < 0 {
		return exec.Request{}, fmt.Errorf("timeout %v: %w: want seconds > 0", timeout, exec.ErrInvalid)
	}
	if limit < 0 {
		return exec.Request{}, fmt.Errorf("output_limit %d: %w: want bytes > 0", limit, exec.ErrInvalid)
	}
	req := exec.Request{Command: command, Cwd: cwd, Env: env, OutputLimit: limit,
		Timeout: time.Duration(timeout * float64(time.Second))}
	if timeout == 0 {
		req.Timeout = -1
	}
	if stdin != "" {
		req.Stdin = strings.NewReader(stdin)
	}
	return req, nil
}

func execute(ctx context.Context, c *call, in ExecuteInput) (ExecuteOutput, error) {
	if in.Timeout <= 0 {
		return ExecuteOutput{}, fmt.Errorf("timeout %v: %w: want seconds > 0", in.Timeout, exec.ErrInvalid)
	}
	req, err := request(in.Command, in.Cwd, in.Env, in.Stdin, in.Timeout, in.OutputLimit)
	if err != nil {
		return ExecuteOutput{}, err
	}
	done, err := c.admit(false)
	if err != nil {
		return ExecuteOutput{}, err
	}
	res, err := c.Backend.Exec(ctx, req)
	done()
	if res == nil {
		return ExecuteOutput{}, err
	}
	if res.TimedOut {
		return ExecuteOutput{}, apierr.New(apierr.Timeout, "command timed out after %gs; it and every process it started were killed. Output so far:\n%s",
			in.Timeout, res.Merged)
	}
	if err != nil && !errors.Is(err, exec.ErrChanges) {
		// The sync barrier failed: what the command wrote may not be durable.
		return ExecuteOutput{}, err
	}
	out := ExecuteOutput{ExitCode: res.ExitCode, Output: string(res.Merged), Truncated: res.Truncated,
		DurationMS: res.Duration.Milliseconds()}
	if ch := res.Changes; ch != nil {
		out.Changes = &Changes{Created: ch.Created, Modified: ch.Modified, Deleted: ch.Deleted}
	}
	return out, nil
}

// BackgroundStartInput are background_start's arguments.
type BackgroundStartInput struct {
	Command     string            `json:"command" jsonschema:"shell command line, run as sh -c COMMAND"`
	Timeout     float64           `json:"timeout,omitempty" jsonschema:"seconds after which the job and every process it started are killed (default 0: no timeout)"`
	Cwd         string            `json:"cwd,omitempty" jsonschema:"working directory, relative to the workspace root (default: the root)"`
	Env         map[string]string `json:"env,omitempty" jsonschema:"environment variables added for this job"`
	OutputLimit int64             `json:"output_limit,omitempty" jsonschema:"maximum bytes of output kept, stdout and stderr together (default 1048576)"`
}

func (in BackgroundStartInput) errPath() string { return in.Cwd }

// JobStatus describes a background job.
type JobStatus struct {
	JobID   string    `json:"job_id"`
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Running bool      `json:"running"`
	// ExitCode is set once the job has ended (137 when killed).
	ExitCode *int `json:"exit_code,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
}

var backgroundStartTool = &sdk.Tool{
	Name:  "background_start",
	Title: "Start a background job",
	Description: `Start a shell command (sh -c) in the workspace in the background and return its job_id at once. Use it for servers, watchers and anything longer than a few minutes; read its output with background_output and stop it with background_kill. The job keeps running after this call, until it exits, its timeout fires or it is killed.
Errors: not_found or path_escape (bad cwd), policy_refused, invalid_argument (empty command).`,
	InputSchema: inputSchema[BackgroundStartInput](map[string]any{"timeout": 0, "cwd": ""}),
	Annotations: runs,
}

func backgroundStart(ctx context.Context, c *call, in BackgroundStartInput) (JobStatus, error) {
	req, err := request(in.Command, in.Cwd, in.Env, "", in.Timeout, in.OutputLimit)
	if err != nil {
		return JobStatus{}, err
	}
	done, err := c.admit(true)
	if err != nil {
		return JobStatus{}, err
	}
	j, err := c.Backend.Start(ctx, req)
	if err != nil {
		done()
		return JobStatus{}, err
	}
	// The workspace stays pinned, and the job admitted, while it runs.
	release := c.hold()
	go func() {
		<-j.Done()
		done()
		release()
	}()
	return jobStatus(ctx, j), nil
}

// jobStatus describes j as it is now.
func jobStatus(ctx context.Context, j *exec.Job) JobStatus {
	st := JobStatus{JobID: j.ID(), Command: j.Command(), Started: j.Started().UTC(), Running: j.Running()}
	if !st.Running {
		// Wait returns at once for a job that ended.
		if res, _ := j.Wait(ctx); res != nil {
			st.ExitCode, st.TimedOut = &res.ExitCode, res.TimedOut
		}
	}
	return st
}

// BackgroundListInput are background_list's arguments: none.
type BackgroundListInput struct{}

// BackgroundListOutput is background_list's result.
type BackgroundListOutput struct {
	Jobs []JobStatus `json:"jobs"`
}

var backgroundListTool = &sdk.Tool{
	Name:        "background_list",
	Title:       "List background jobs",
	Description: `List the background jobs of the workspace, running or ended, in start order: job_id, command, start time, whether it runs, and the exit code of those that ended.`,
	InputSchema: inputSchema[BackgroundListInput](nil),
	Annotations: readOnly,
}

func backgroundList(ctx context.Context, c *call, _ BackgroundListInput) (BackgroundListOutput, error) {
	out := BackgroundListOutput{Jobs: []JobStatus{}}
	for _, j := range c.Backend.Jobs() {
		out.Jobs = append(out.Jobs, jobStatus(ctx, j))
	}
	return out, nil
}

// BackgroundOutputInput are background_output's arguments.
type BackgroundOutputInput struct {
	JobID  string  `json:"job_id" jsonschema:"the job_id background_start returned"`
	Offset int     `json:"offset,omitempty" jsonschema:"byte offset in the job's output to read from (default 0: from the start); pass the next_offset of the previous call to get only what is new"`
	Wait   float64 `json:"wait,omitempty" jsonschema:"seconds to wait for the job to end before answering (default 0: answer at once; at most 300)"`
}

// BackgroundOutputOutput is background_output's result.
type BackgroundOutputOutput struct {
	JobStatus
	// Output is the job's output (stdout and stderr interleaved) from
	// offset on.
	Output     string `json:"output"`
	NextOffset int    `json:"next_offset"`
	// Truncated is set when the job printed more than its output limit.
	Truncated bool `json:"truncated"`
}

var backgroundOutputTool = &sdk.Tool{
	Name:  "background_output",
	Title: "Read a background job's output",
	Description: `Return a background job's output (stdout and stderr interleaved) from a byte offset, whether it still runs, and its exit code once it ended. Poll with offset = the next_offset of the previous call to see only new output; set wait to block until the job ends (up to that many seconds).
Errors: not_found (no such job_id), invalid_argument (offset past the end of the output).`,
	InputSchema: inputSchema[BackgroundOutputInput](map[string]any{"offset": 0, "wait": 0}),
	Annotations: readOnly,
}

func backgroundOutput(ctx context.Context, c *call, in BackgroundOutputInput) (BackgroundOutputOutput, error) {
	j, err := c.Backend.Job(in.JobID)
	if err != nil {
		return BackgroundOutputOutput{}, err
	}
	if in.Wait < 0 || in.Wait > maxWait {
		return BackgroundOutputOutput{}, fmt.Errorf("wait %v: %w: want 0 to %d seconds", in.Wait, exec.ErrInvalid, maxWait)
	}
	if in.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(in.Wait*float64(time.Second)))
		_, _ = j.Wait(wctx) // a job still running after wait is no error
		cancel()
	}
	return jobOutput(ctx, j, in.Offset)
}

// jobOutput is j's status and its output from offset on.
func jobOutput(ctx context.Context, j *exec.Job, offset int) (BackgroundOutputOutput, error) {
	st := jobStatus(ctx, j) // before the output: an ended job's output is final
	o := j.Output()
	if offset < 0 || offset > len(o.Merged) {
		return BackgroundOutputOutput{}, fmt.Errorf("offset %d: %w: the output of %s has %d bytes", offset, exec.ErrInvalid, j.ID(), len(o.Merged))
	}
	return BackgroundOutputOutput{JobStatus: st, Output: string(o.Merged[offset:]), NextOffset: len(o.Merged), Truncated: o.Truncated}, nil
}

// BackgroundKillInput are background_kill's arguments.
type BackgroundKillInput struct {
	JobID string `json:"job_id" jsonschema:"the job_id background_start returned"`
}

var backgroundKillTool = &sdk.Tool{
	Name:  "background_kill",
	Title: "Kill a background job",
	Description: `Kill a background job and every process it started (SIGKILL), wait until it has ended, and return its final status and whole output. Killing a job that already ended changes nothing.
Errors: not_found (no such job_id).`,
	InputSchema: inputSchema[BackgroundKillInput](nil),
	Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
}

func backgroundKill(ctx context.Context, c *call, in BackgroundKillInput) (BackgroundOutputOutput, error) {
	j, err := c.Backend.Job(in.JobID)
	if err != nil {
		return BackgroundOutputOutput{}, err
	}
	j.Kill()
	return jobOutput(ctx, j, 0)
}

func addExecTools(s *sdk.Server, ws source) {
	addTool(s, ws, executeTool, execute)
	addTool(s, ws, backgroundStartTool, backgroundStart)
	addTool(s, ws, backgroundListTool, backgroundList)
	addTool(s, ws, backgroundOutputTool, backgroundOutput)
	addTool(s, ws, backgroundKillTool, backgroundKill)
}
