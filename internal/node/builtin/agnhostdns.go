package builtin

import (
	"fmt"
	"os"
	"strings"
)

// resolvConfFirst is the fields after key on the first line of the
// resolv.conf file that starts with it, as agnhost's dns-suffix and
// dns-server-list read them.
func resolvConfFirst(file, key string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, key) {
			return strings.Split(strings.TrimRight(line, "\n"), " ")[1:], nil
		}
	}
	return nil, fmt.Errorf("no %s line in %s", key, file)
}

// printResolvConf prints, joined by commas, the search domains
// (dns-suffix) or the name servers (dns-server-list) of the container's
// /etc/resolv.conf, as agnhost's subcommands of those names.
func printResolvConf(key string) error {
	list, err := resolvConfFirst("/etc/resolv.conf", key)
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(list, ","))
	return nil
}

// printEtcHosts prints the container's /etc/hosts, as agnhost etc-hosts.
func printEtcHosts() error {
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}
