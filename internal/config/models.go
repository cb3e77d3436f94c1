package config

import "github.com/tandem-dev/tandem/internal/models"

// Catalog is what Tandem knows of models with this configuration: the
// built-in table, with the configuration's models entries over it (the
// server file's, then the workspace file's, merged as Merge merges them).
// An entry overrides only the fields it sets, so {"context_window": 50000}
// for a well-known model keeps its built-in prices. A nil Config has the
// built-in table alone.
func (c *Config) Catalog() *models.Catalog {
	if c == nil || c.catalog == nil {
		return builtinCatalog
	}
	return c.catalog
}

var builtinCatalog = models.New(nil)

// catalogOf makes the catalog of merged models entries.
func catalogOf(entries map[string]Model) *models.Catalog {
	if len(entries) == 0 {
		return builtinCatalog
	}
	specs := make(map[string]models.Spec, len(entries))
	for name, m := range entries {
		specs[name] = models.Spec{
			ContextWindow:   m.ContextWindow,
			MaxOutputTokens: m.MaxOutputTokens,
			InputPrice:      m.InputPrice,
			OutputPrice:     m.OutputPrice,
		}
	}
	return models.New(specs)
}
