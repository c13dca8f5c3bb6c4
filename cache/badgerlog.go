package cache

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// badgerLog adapts a *slog.Logger to badger.Logger, so that Badger's own
// messages (a corrupt value log, a failed compaction, a slow flush) reach
// the volume's log instead of being discarded. Errors and warnings keep
// their level; Badger's info and debug chatter (tables opened, compactions
// run) is logged at debug level. Each record carries component=badger.
type badgerLog struct{ log *slog.Logger }

func newBadgerLog(log *slog.Logger) badgerLog {
	return badgerLog{log: log.With("component", "badger")}
}

// Errorf logs at error level.
func (b badgerLog) Errorf(format string, args ...any) { b.emit(slog.LevelError, format, args) }

// Warningf logs at warning level.
func (b badgerLog) Warningf(format string, args ...any) { b.emit(slog.LevelWarn, format, args) }

// Infof logs at debug level: Badger's info lines are routine.
func (b badgerLog) Infof(format string, args ...any) { b.emit(slog.LevelDebug, format, args) }

// Debugf logs at debug level.
func (b badgerLog) Debugf(format string, args ...any) { b.emit(slog.LevelDebug, format, args) }

// emit formats only when the level is enabled (Badger's debug lines are
// many) and drops the trailing newline Badger puts on most messages.
func (b badgerLog) emit(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !b.log.Enabled(ctx, level) {
		return
	}
	b.log.Log(ctx, level, strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}
