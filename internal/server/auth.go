package server

import (
	"os"
	"path/filepath"

	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/store"
)

// newAuth builds the service of people's tokens on the server's store: the
// data dir's token is the owner named "owner", made when its file was.
func newAuth(cfg Config, db store.Store, dir *DataDir) *auth.Service {
	ac := auth.Config{
		OwnerToken: cfg.Token,
		Rate:       auth.DefaultRate,
		Burst:      auth.DefaultBurst,
		WatchEvery: cfg.TokenWatchEvery,
		Logger:     cfg.Logger,
	}
	if cfg.RateSet {
		ac.Rate, ac.Burst, ac.LimitOwner = cfg.Rate, 0, true
	}
	if st, ok := db.(store.Auth); ok {
		ac.Store = st
	}
	if fi, err := os.Stat(filepath.Join(dir.Path(), "token")); err == nil {
		ac.OwnerCreatedAt = fi.ModTime()
	}
	return auth.New(ac)
}
