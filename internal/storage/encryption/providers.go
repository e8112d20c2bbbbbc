package encryption

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"

	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/storage/value"
	aestransformer "k8s.io/apiserver/pkg/storage/value/encrypt/aes"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
	"k8s.io/apiserver/pkg/storage/value/encrypt/secretbox"
)

// Upstream's prefixes of stored values, each followed by the key's name
// and ":".
const (
	aesCBCPrefix    = "k8s:enc:aescbc:v1:"
	aesGCMPrefix    = "k8s:enc:aesgcm:v1:"
	secretboxPrefix = "k8s:enc:secretbox:v1:"
)

// prefixTransformers are the transformers of one resources entry's
// providers, in order.
func prefixTransformers(entry apiserver.ResourceConfiguration) ([]value.PrefixTransformer, error) {
	var out []value.PrefixTransformer
	for _, p := range entry.Providers {
		var (
			t   value.PrefixTransformer
			err error
		)
		switch {
		case p.AESGCM != nil:
			t, err = aesPrefixTransformer(p.AESGCM, aestransformer.NewGCMTransformer, aesGCMPrefix)
		case p.AESCBC != nil:
			t, err = aesPrefixTransformer(p.AESCBC, func(b cipher.Block) (value.Transformer, error) {
				return aestransformer.NewCBCTransformer(b), nil
			}, aesCBCPrefix)
		case p.Secretbox != nil:
			t, err = secretboxPrefixTransformer(p.Secretbox)
		case p.Identity != nil:
			// No prefix: it reads what is not encrypted, and refuses what
			// is (letting a later provider try).
			t = value.PrefixTransformer{Transformer: identity.NewEncryptCheckTransformer(), Prefix: []byte{}}
		case p.KMS != nil:
			err = errors.New(kmsErr)
		default:
			err = errors.New(noProviderErr)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// providerName names p's kind, as the configuration spells it.
func providerName(p apiserver.ProviderConfiguration) string {
	switch {
	case p.AESGCM != nil:
		return "aesgcm"
	case p.AESCBC != nil:
		return "aescbc"
	case p.Secretbox != nil:
		return "secretbox"
	case p.Identity != nil:
		return "identity"
	case p.KMS != nil:
		return "kms"
	}
	return ""
}

// checkKeys wants every key named and with a secret, as upstream.
func checkKeys(keys []apiserver.Key, provider string) error {
	if len(keys) == 0 {
		return fmt.Errorf("%s provider has no valid keys", provider)
	}
	for _, k := range keys {
		if k.Name == "" {
			return errors.New("key with invalid name provided")
		}
		if k.Secret == "" {
			return fmt.Errorf("key %v has no provided secret", k.Name)
		}
	}
	return nil
}

// keyed is the transformer choosing among one provider's keys by the
// "name:" after the provider's prefix: the first key writes.
func keyed(prefix, provider string, keys []value.PrefixTransformer) value.PrefixTransformer {
	return value.PrefixTransformer{
		Transformer: value.NewPrefixTransformers(fmt.Errorf("no matching key was found for the provided %s transformer", provider), keys...),
		Prefix:      []byte(prefix),
	}
}

func aesPrefixTransformer(c *apiserver.AESConfiguration, newTransformer func(cipher.Block) (value.Transformer, error), prefix string) (value.PrefixTransformer, error) {
	if err := checkKeys(c.Keys, "aes"); err != nil {
		return value.PrefixTransformer{}, err
	}
	var keys []value.PrefixTransformer
	for _, k := range c.Keys {
		secret, err := base64.StdEncoding.DecodeString(k.Secret)
		if err != nil {
			return value.PrefixTransformer{}, fmt.Errorf("could not obtain secret for named key %s: %w", k.Name, err)
		}
		block, err := aes.NewCipher(secret)
		if err != nil {
			return value.PrefixTransformer{}, fmt.Errorf("error while creating cipher for named key %s: %w", k.Name, err)
		}
		t, err := newTransformer(block)
		if err != nil {
			return value.PrefixTransformer{}, fmt.Errorf("error while creating transformer for named key %s: %w", k.Name, err)
		}
		keys = append(keys, value.PrefixTransformer{Transformer: t, Prefix: []byte(k.Name + ":")})
	}
	return keyed(prefix, "AES", keys), nil
}

func secretboxPrefixTransformer(c *apiserver.SecretboxConfiguration) (value.PrefixTransformer, error) {
	if err := checkKeys(c.Keys, "secretbox"); err != nil {
		return value.PrefixTransformer{}, err
	}
	var keys []value.PrefixTransformer
	for _, k := range c.Keys {
		secret, err := base64.StdEncoding.DecodeString(k.Secret)
		if err != nil {
			return value.PrefixTransformer{}, fmt.Errorf("could not obtain secret for named key %s: %s", k.Name, err)
		}
		if len(secret) != 32 {
			return value.PrefixTransformer{}, fmt.Errorf("expected key size 32 for secretbox provider, got %v", len(secret))
		}
		var key [32]byte
		copy(key[:], secret)
		keys = append(keys, value.PrefixTransformer{Transformer: secretbox.NewSecretboxTransformer(key), Prefix: []byte(k.Name + ":")})
	}
	return keyed(secretboxPrefix, "Secretbox", keys), nil
}
