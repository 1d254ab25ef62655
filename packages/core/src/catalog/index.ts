export {
  bankEntrySchema,
  catalogSchema,
  currencyEntrySchema,
  fieldEntrySchema,
  methodEntrySchema,
  narrowCatalog,
  type BankEntry,
  type Catalog,
  type CurrencyEntry,
  type FieldEntry,
  type MethodEntry,
} from './schema.ts';
export {
  BANK_NAME_PARAM,
  MAX_PARAM_LENGTH,
  validatePayout,
  type PayoutInput,
  type PayoutProblem,
  type PayoutValidation,
} from './validate.ts';
export { compilePattern, MAX_PATTERN_LENGTH, type CompiledPattern } from './pattern.ts';
export {
  catalogScopeOf,
  createCatalogCache,
  refreshCatalog,
  type CatalogCache,
  type CatalogCacheDeps,
  type CatalogSource,
  type CatalogView,
} from './cache.ts';
