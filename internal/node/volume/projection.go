package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultFileMode is the API's default defaultMode, 0644.
const defaultFileMode int32 = corev1.ConfigMapVolumeSourceDefaultMode

func mode(item, def *int32) fs.FileMode {
	switch {
	case item != nil:
		return fs.FileMode(*item)
	case def != nil:
		return fs.FileMode(*def)
	}
	return fs.FileMode(defaultFileMode)
}

// keyed projects a map of keys (a ConfigMap's or a Secret's) through items:
// every key at its own name when items is empty, else each item's key at
// its path. A missing key is an error (missing names it) unless optional.
func keyed(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool, missing func(key string) error) (map[string]File, error) {
	out := map[string]File{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = File{Data: v, Mode: mode(nil, defaultMode)}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, missing(it.Key)
		}
		out[it.Path] = File{Data: v, Mode: mode(it.Mode, defaultMode)}
	}
	return out, nil
}

// ConfigMap is a configMap volume's files; cm nil means the ConfigMap does
// not exist (the caller has checked that it is optional).
func ConfigMap(src *corev1.ConfigMapVolumeSource, cm *corev1.ConfigMap) (map[string]File, error) {
	return configMapFiles(cm, src.Items, src.DefaultMode, optional(src.Optional))
}

func configMapFiles(cm *corev1.ConfigMap, items []corev1.KeyToPath, defaultMode *int32, opt bool) (map[string]File, error) {
	if cm == nil {
		return map[string]File{}, nil
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyed(data, items, defaultMode, opt, func(key string) error {
		return fmt.Errorf("configmap references non-existent config key: %s", key)
	})
}

// Secret is a secret volume's files; sec nil means the Secret does not
// exist (the caller has checked that it is optional).
func Secret(src *corev1.SecretVolumeSource, sec *corev1.Secret) (map[string]File, error) {
	return secretFiles(sec, src.Items, src.DefaultMode, optional(src.Optional))
}

func secretFiles(sec *corev1.Secret, items []corev1.KeyToPath, defaultMode *int32, opt bool) (map[string]File, error) {
	if sec == nil {
		return map[string]File{}, nil
	}
	return keyed(sec.Data, items, defaultMode, opt, func(key string) error {
		return fmt.Errorf("references non-existent secret key: %s", key)
	})
}

// FieldValue resolves one downward API item (a fieldRef or a
// resourceFieldRef) to its value.
type FieldValue func(item corev1.DownwardAPIVolumeFile) (string, error)

// DownwardAPI is a downwardAPI volume's files.
func DownwardAPI(src *corev1.DownwardAPIVolumeSource, value FieldValue) (map[string]File, error) {
	return downwardFiles(src.Items, src.DefaultMode, value)
}

func downwardFiles(items []corev1.DownwardAPIVolumeFile, defaultMode *int32, value FieldValue) (map[string]File, error) {
	out := map[string]File{}
	for _, it := range items {
		v, err := value(it)
		if err != nil {
			return nil, fmt.Errorf("downward API item %s: %w", it.Path, err)
		}
		out[it.Path] = File{Data: []byte(v), Mode: mode(it.Mode, defaultMode)}
	}
	return out, nil
}

// Sources are the objects a projected volume reads, by name; a name
// missing from a map does not exist.
type Sources struct {
	ConfigMaps map[string]*corev1.ConfigMap
	Secrets    map[string]*corev1.Secret
	Field      FieldValue
	// Tokens are what the serviceAccountToken projections write, by path.
	Tokens map[string][]byte
	// TrustBundles are what the clusterTrustBundle projections write (PEM
	// certificates), by path.
	TrustBundles map[string][]byte
	// PodCertificates are the credentials the podCertificate projections
	// write, by the projection's index in the volume's sources.
	PodCertificates map[int]Credentials
}

// Credentials are a pod certificate's private key and certificate chain
// (leaf first), as PEM.
type Credentials struct {
	Key, Chain []byte
}

// Projected is a projected volume's files: the union of its sources, in
// order. A missing ConfigMap or Secret that is not optional is an error.
func Projected(src *corev1.ProjectedVolumeSource, s Sources) (map[string]File, error) {
	out := map[string]File{}
	add := func(files map[string]File) {
		for p, f := range files {
			out[p] = f
		}
	}
	for i, p := range src.Sources {
		switch {
		case p.ConfigMap != nil:
			cm, ok := s.ConfigMaps[p.ConfigMap.Name]
			if !ok && !optional(p.ConfigMap.Optional) {
				return nil, fmt.Errorf("configmap %q not found", p.ConfigMap.Name)
			}
			files, err := configMapFiles(cm, p.ConfigMap.Items, src.DefaultMode, optional(p.ConfigMap.Optional))
			if err != nil {
				return nil, err
			}
			add(files)
		case p.Secret != nil:
			sec, ok := s.Secrets[p.Secret.Name]
			if !ok && !optional(p.Secret.Optional) {
				return nil, fmt.Errorf("secret %q not found", p.Secret.Name)
			}
			files, err := secretFiles(sec, p.Secret.Items, src.DefaultMode, optional(p.Secret.Optional))
			if err != nil {
				return nil, err
			}
			add(files)
		case p.DownwardAPI != nil:
			files, err := downwardFiles(p.DownwardAPI.Items, src.DefaultMode, s.Field)
			if err != nil {
				return nil, err
			}
			add(files)
		case p.ServiceAccountToken != nil:
			out[p.ServiceAccountToken.Path] = File{Data: s.Tokens[p.ServiceAccountToken.Path], Mode: mode(nil, src.DefaultMode)}
		case p.ClusterTrustBundle != nil:
			out[p.ClusterTrustBundle.Path] = File{Data: s.TrustBundles[p.ClusterTrustBundle.Path], Mode: mode(nil, src.DefaultMode)}
		case p.PodCertificate != nil:
			add(podCertificateFiles(p.PodCertificate, s.PodCertificates[i], mode(nil, src.DefaultMode)))
		}
	}
	return out, nil
}

// podCertificateFiles are the files of a podCertificate projection, as
// the kubelet writes them: the key then the chain in credentialBundlePath,
// the key alone in keyPath, the chain alone in certificateChainPath.
func podCertificateFiles(p *corev1.PodCertificateProjection, c Credentials, m fs.FileMode) map[string]File {
	out := map[string]File{}
	if p.CredentialBundlePath != "" {
		out[p.CredentialBundlePath] = File{Data: slices.Concat(c.Key, c.Chain), Mode: m}
	}
	if p.KeyPath != "" {
		out[p.KeyPath] = File{Data: c.Key, Mode: m}
	}
	if p.CertificateChainPath != "" {
		out[p.CertificateChainPath] = File{Data: c.Chain, Mode: m}
	}
	return out
}

func optional(b *bool) bool { return b != nil && *b }

// SubPath joins a volume mount's subPath to the volume's directory,
// refusing a path that leaves it: absolute, with '..', or through a
// symbolic link that points outside. A subPath that does not exist yet is
// created as a directory, as the kubelet does. It returns the path with
// links resolved, which is what a bind mount of it holds.
func SubPath(volumeDir, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("subpath %q must be a relative path", sub)
	}
	for _, seg := range strings.Split(sub, "/") {
		if seg == ".." {
			return "", fmt.Errorf("subpath %q must not contain '..'", sub)
		}
	}
	base, err := filepath.EvalSymlinks(volumeDir)
	if err != nil {
		return "", fmt.Errorf("resolve volume path: %w", err)
	}
	info, err := os.Stat(base)
	if err != nil {
		return "", fmt.Errorf("stat volume path: %w", err)
	}
	inside := func(p string) bool { return p == base || strings.HasPrefix(p, base+"/") }
	cur := base
	for _, seg := range strings.Split(filepath.Clean(sub), "/") {
		next := filepath.Join(cur, seg)
		if _, err := os.Lstat(next); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(next, info.Mode().Perm()); err != nil {
				return "", fmt.Errorf("create subpath %q: %w", sub, err)
			}
		} else if err != nil {
			return "", fmt.Errorf("stat subpath %q: %w", sub, err)
		}
		if cur, err = filepath.EvalSymlinks(next); err != nil {
			return "", fmt.Errorf("resolve subpath %q: %w", sub, err)
		}
		if !inside(cur) {
			return "", fmt.Errorf("subpath %q is outside of the volume", sub)
		}
	}
	return cur, nil
}
