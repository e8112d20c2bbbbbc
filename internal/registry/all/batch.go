package all

import (
	"github.com/svcnet/svcnet/internal/registry"
	"github.com/svcnet/svcnet/internal/registry/cronjob"
	"github.com/svcnet/svcnet/internal/registry/job"
)

// batch returns the resources of batch/v1.
func batch() []*registry.Resource {
	return []*registry.Resource{job.Resource(), cronjob.Resource()}
}
