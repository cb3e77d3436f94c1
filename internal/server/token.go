package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadOrCreateToken returns the token kept in dataDir/token, generating and
// writing one (mode 0600) when there is none. Reusing it across restarts lets
// local clients keep reading the same file.
func LoadOrCreateToken(dataDir string) (token, path string, err error) {
	path = filepath.Join(dataDir, tokenFileName)
	b, err := os.ReadFile(path)
	if err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			// Tighten a file somebody loosened: it is a credential.
			if err := os.Chmod(path, 0o600); err != nil {
				return "", "", fmt.Errorf("protect token file: %w", err)
			}
			return t, path, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("read token file: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("generate token: %w", err)
	}
	token = hex.EncodeToString(raw)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", "", fmt.Errorf("create data dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write token file: %w", err)
	}
	return token, path, nil
}

// tokenFileName is the owner token's file in the data dir.
const tokenFileName = "token"
