/**
 * The sandbox's payment-method catalog: what `getPaymentMethods` returns. The spec says the response is the
 * authority, not a fixed list, so this one is deliberately varied: currencies with 0, 2 and 3 decimals; bank,
 * wallet and QR-code methods; fields with patterns, hints, optional ones and one that cannot be passed through
 * the API (empty `apiParam`); methods with and without `banks[]`.
 */

/** A field to fill in for a method (spec: element of `fields[]`). */
export interface CatalogField {
  key: string;
  /** Parameter of the create-payout request; empty means it cannot be passed through the API. */
  apiParam: string;
  label: string;
  required: boolean;
  /** Regular expression the value must match; empty means no restriction. */
  pattern: string;
  hint: string;
}

/** A collection method (spec: element of `methods[]`). */
export interface CatalogMethod {
  paymentMethod: number;
  name: string;
  kind: 'bank' | 'wallet' | 'qrcode';
  fields: CatalogField[];
  /** When present, `bankName` in the payout request must be one of these. */
  banks?: { name: string; code: string }[];
}

/** A currency entry (spec: element of `data.currencies[]`). */
export interface CatalogCurrency {
  currency: string;
  symbol: string;
  decimals: number;
  methods: CatalogMethod[];
}

const f = (
  key: string,
  apiParam: string,
  label: string,
  required: boolean,
  pattern: string,
  hint: string,
): CatalogField => ({ key, apiParam, label, required, pattern, hint });

const accountName = f(
  'accountName',
  'accountName',
  'Account holder name',
  true,
  "^[A-Za-z .'-]{2,64}$",
  'As printed on the account',
);

/** The catalog, in the order the sandbox returns it. */
export const CATALOG: readonly CatalogCurrency[] = [
  {
    currency: 'INR',
    symbol: '₹',
    decimals: 2,
    methods: [
      {
        paymentMethod: 101,
        name: 'IMPS bank transfer',
        kind: 'bank',
        fields: [
          accountName,
          f('accountNo', 'accountNo', 'Account number', true, '^\\d{9,18}$', '9 to 18 digits'),
          f('ifsc', 'ifscCode', 'IFSC code', true, '^[A-Z]{4}0[A-Z0-9]{6}$', 'e.g. SBIN0001234'),
          f('bankName', 'bankName', 'Bank', true, '', 'Choose from the list'),
          f('branch', 'branchName', 'Branch', false, '', 'Optional'),
        ],
        banks: [
          { name: 'State Bank of India', code: 'SBIN' },
          { name: 'HDFC Bank', code: 'HDFC' },
          { name: 'ICICI Bank', code: 'ICIC' },
          { name: 'Axis Bank', code: 'UTIB' },
        ],
      },
      {
        paymentMethod: 102,
        name: 'UPI',
        kind: 'wallet',
        fields: [
          accountName,
          f('upiId', 'accountNo', 'UPI ID', true, '^[A-Za-z0-9._-]{2,256}@[A-Za-z]{2,64}$', 'e.g. name@okaxis'),
        ],
      },
      {
        paymentMethod: 103,
        name: 'UPI QR',
        kind: 'qrcode',
        fields: [
          f('qrCode', 'qrCode', 'QR code content', true, '^upi://pay\\?.+$', 'Text decoded from the QR code'),
          // Collected in the console only: the API has no parameter for it.
          f('payeeNote', '', 'Note to payee', false, '', 'Only in the merchant console'),
        ],
      },
    ],
  },
  {
    currency: 'BRL',
    symbol: 'R$',
    decimals: 2,
    methods: [
      {
        paymentMethod: 201,
        name: 'PIX',
        kind: 'wallet',
        fields: [
          accountName,
          f(
            'pixKeyType',
            'accountType',
            'PIX key type',
            true,
            '^(CPF|CNPJ|EMAIL|PHONE|EVP)$',
            'CPF, CNPJ, EMAIL, PHONE or EVP',
          ),
          f('pixKey', 'accountNo', 'PIX key', true, '^.{1,77}$', 'The key of the chosen type'),
          f('taxId', 'documentNo', 'CPF/CNPJ', true, '^(\\d{11}|\\d{14})$', '11 or 14 digits, no punctuation'),
        ],
      },
      {
        paymentMethod: 202,
        name: 'TED bank transfer',
        kind: 'bank',
        fields: [
          accountName,
          f('bankName', 'bankName', 'Bank', true, '', 'Choose from the list'),
          f('agency', 'branchCode', 'Agency', true, '^\\d{4}$', '4 digits'),
          f('accountNo', 'accountNo', 'Account number', true, '^\\d{5,12}-?\\d$', 'With check digit'),
        ],
        banks: [
          { name: 'Banco do Brasil', code: '001' },
          { name: 'Itaú Unibanco', code: '341' },
          { name: 'Bradesco', code: '237' },
        ],
      },
    ],
  },
  {
    currency: 'VND',
    symbol: '₫',
    decimals: 0,
    methods: [
      {
        paymentMethod: 301,
        name: 'Bank transfer',
        kind: 'bank',
        fields: [
          accountName,
          f('accountNo', 'accountNo', 'Account number', true, '^\\d{6,19}$', '6 to 19 digits'),
          f('bankName', 'bankName', 'Bank', true, '', 'Choose from the list'),
        ],
        banks: [
          { name: 'Vietcombank', code: 'VCB' },
          { name: 'Techcombank', code: 'TCB' },
          { name: 'BIDV', code: 'BIDV' },
        ],
      },
      {
        paymentMethod: 302,
        name: 'MoMo',
        kind: 'wallet',
        fields: [f('phone', 'accountNo', 'MoMo phone number', true, '^0\\d{9}$', '10 digits starting with 0')],
      },
      {
        paymentMethod: 303,
        name: 'VietQR',
        kind: 'qrcode',
        fields: [f('qrCode', 'qrCode', 'QR code content', true, '', 'Text decoded from the QR code')],
      },
    ],
  },
  {
    currency: 'KWD',
    symbol: 'KD',
    decimals: 3,
    methods: [
      {
        paymentMethod: 401,
        name: 'Local bank transfer',
        kind: 'bank',
        fields: [
          accountName,
          f('iban', 'accountNo', 'IBAN', true, '^KW\\d{2}[A-Z]{4}\\d{22}$', 'KW followed by 28 characters'),
          f(
            'swift',
            'swiftCode',
            'SWIFT/BIC',
            false,
            '^[A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?$',
            'Optional for local banks',
          ),
        ],
      },
    ],
  },
];

/**
 * USDT per one unit of each currency (exact decimal text), used to compute a pay-in's `Quantity` when the creator
 * does not give one. Illustrative, fixed rates: the sandbox has no market.
 */
export const USDT_RATES: Readonly<Record<string, string>> = {
  INR: '0.011976',
  BRL: '0.1785',
  VND: '0.0000393',
  KWD: '3.2515',
};

/** The catalog entry of `currency`, or undefined when the sandbox does not enable it. */
export function findCurrency(currency: string): CatalogCurrency | undefined {
  return CATALOG.find((c) => c.currency === currency);
}
