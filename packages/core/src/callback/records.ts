/**
 * The platform's side of a callback: the decrypted record, as the sandbox, benchmarks and tests build it before
 * `encryptRecord`. Built as JSON text by hand: `Quantity` and `FiatCurrency` are JSON numbers
 * written with their exact decimal text ("1000.10" stays 1000.10), which JSON.stringify of a number cannot do.
 */

const UTC8_MS = 8 * 3600_000;

/** `yyyy-MM-ddTHH:mm:ss` in UTC+8, the spec's PayTime format. */
export function formatPayTime(at: Date): string {
  return new Date(at.getTime() + UTC8_MS).toISOString().slice(0, 19);
}

/** Fields of a pay-in callback record (spec, Events). Amounts are exact decimal text. */
export interface PayinRecordFields {
  orderNo: string;
  merchantNo: string;
  merchantOrderNo: string;
  payTime: Date;
  orderState: number;
  quantity: string;
  fiatAmount: string;
}

/** Fields of a payout callback record. */
export interface PayoutRecordFields {
  orderNo: string;
  merchantNo: string;
  merchantOrderNo: string;
  payTime: Date | null;
  state: number;
}

const DECIMAL = /^-?\d+(\.\d+)?$/;

function decimalLiteral(text: string): string {
  // Guard the hand-built JSON: only plain decimals may be written unquoted.
  if (!DECIMAL.test(text)) throw new RangeError(`not a decimal literal: ${JSON.stringify(text)}`);
  return text;
}

/** The pay-in record's JSON text, field names exactly as the spec writes them. */
export function payinRecordJson(r: PayinRecordFields): string {
  return (
    `{"OrderNo":${JSON.stringify(r.orderNo)},"MerchantNo":${JSON.stringify(r.merchantNo)},` +
    `"MerchantOrderNo":${JSON.stringify(r.merchantOrderNo)},"PayTime":${JSON.stringify(formatPayTime(r.payTime))},` +
    `"OrderState":${r.orderState},"Quantity":${decimalLiteral(r.quantity)},"FiatCurrency":${decimalLiteral(r.fiatAmount)}}`
  );
}

/** The payout record's JSON text; `state` is lowercase, as the spec says, and `PayTime` may be null. */
export function payoutRecordJson(r: PayoutRecordFields): string {
  return JSON.stringify({
    OrderNo: r.orderNo,
    MerchantNo: r.merchantNo,
    MerchantOrderNo: r.merchantOrderNo,
    PayTime: r.payTime ? formatPayTime(r.payTime) : null,
    state: r.state,
  });
}
