package encryption

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SecretsConfigFile is the name of the configuration `svcnet up
// --encrypt-secrets` keeps in the data dir's pki directory.
const SecretsConfigFile = "encryption-config.yaml"

// secretsConfig encrypts Secrets with one aescbc key; identity last reads
// the Secrets stored before encryption was turned on (the next write of
// each encrypts it), as upstream's documentation does.
const secretsConfig = `# Written by svcnet up --encrypt-secrets: Secrets are encrypted at rest with
# this key. Keep this file: without it the Secrets in etcd cannot be read.
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources:
      - secrets
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: %s
      - identity: {}
`

// EnsureSecretsConfig returns the path of the configuration in dir that
// encrypts Secrets, writing it (mode 0600) with a new random 32-byte
// aescbc key when there is none yet; an existing file is used as it is.
func EnsureSecretsConfig(dir string) (string, error) {
	path := filepath.Join(dir, SecretsConfigFile)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("encryption config: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("encryption config: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("encryption config: generate a key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, SecretsConfigFile+".*")
	if err != nil {
		return "", fmt.Errorf("encryption config: %w", err)
	}
	defer os.Remove(tmp.Name()) // once renamed, there is nothing to remove
	_, err = fmt.Fprintf(tmp, secretsConfig, base64.StdEncoding.EncodeToString(key))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("encryption config: write %s: %w", path, err)
	}
	// Rename-if-absent: another process's file, written meanwhile, wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("encryption config: write %s: %w", path, err)
	}
	return path, nil
}
