/*
 * console.c — console output over the virt machine's ns16550a UART.
 *
 * cop_putchar waits until the transmitter is ready (LSR bit 5) and writes
 * the byte to THR.  cop_vprintf is a small printf: it walks the format,
 * parses one conversion at a time into a struct conversion (flags, width,
 * size, letter), renders numbers into a buffer from the right, and pads.
 */
#include "sdk/cop.h"

#include <stddef.h>
#include <string.h>

/* Room for a 64-bit number in octal would be 22; decimal and hex need less. */
#define NUMBER_MAX 24

enum { SIZE_INT, SIZE_LONG, SIZE_LONG_LONG, SIZE_SIZE_T };

struct conversion {
    int left;           /* '-': pad on the right */
    int zero;           /* '0': pad numbers with zeros */
    int width;
    int size;           /* SIZE_INT, SIZE_LONG, SIZE_LONG_LONG, SIZE_SIZE_T */
    char letter;
};

void cop_putchar(int c)
{
    volatile uint8_t *uart = (volatile uint8_t *)(uintptr_t)COP_UART_BASE;

    while (!(uart[COP_UART_LSR] & COP_UART_LSR_THRE))
        ;
    uart[COP_UART_THR] = (uint8_t)c;
}

static int put_string(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        cop_putchar(s[i]);
    return (int)len;
}

int cop_puts(const char *s)
{
    int n = put_string(s, strlen(s));

    cop_putchar('\n');
    return n + 1;
}

static int put_padding(char c, int count)
{
    for (int i = 0; i < count; i++)
        cop_putchar(c);
    return count > 0 ? count : 0;
}

/* Writes sign + digits padded to the conversion's width. */
static int put_field(const struct conversion *conv, const char *sign,
                     const char *digits, size_t len)
{
    int sign_len = (int)strlen(sign);
    int pad = conv->width - sign_len - (int)len;
    int n = 0;

    if (!conv->left && !conv->zero)
        n += put_padding(' ', pad);
    n += put_string(sign, (size_t)sign_len);
    if (!conv->left && conv->zero)
        n += put_padding('0', pad);
    n += put_string(digits, len);
    if (conv->left)
        n += put_padding(' ', pad);
    return n;
}

/* Renders value in base into the end of buf; returns the first digit. */
static char *render_unsigned(char *end, unsigned long long value,
                             unsigned base, int upper)
{
    const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
    char *p = end;

    do {
        *--p = digits[value % base];
        value /= base;
    } while (value);
    return p;
}

static int put_number(const struct conversion *conv, unsigned long long value,
                      int negative)
{
    char buf[NUMBER_MAX];
    char *end = buf + sizeof(buf);
    const char *sign = negative ? "-" : "";
    char *start;

    switch (conv->letter) {
    case 'x':
        start = render_unsigned(end, value, 16, 0);
        break;
    case 'X':
        start = render_unsigned(end, value, 16, 1);
        break;
    case 'p':
        start = render_unsigned(end, value, 16, 0);
        sign = "0x";
        break;
    default:
        start = render_unsigned(end, value, 10, 0);
        break;
    }
    return put_field(conv, sign, start, (size_t)(end - start));
}

static long long signed_argument(const struct conversion *conv, va_list *args)
{
    switch (conv->size) {
    case SIZE_LONG_LONG:
        return va_arg(*args, long long);
    case SIZE_LONG:
        return va_arg(*args, long);
    case SIZE_SIZE_T:
        return (long long)va_arg(*args, size_t);
    default:
        return va_arg(*args, int);
    }
}

static unsigned long long unsigned_argument(const struct conversion *conv,
                                            va_list *args)
{
    switch (conv->size) {
    case SIZE_LONG_LONG:
        return va_arg(*args, unsigned long long);
    case SIZE_LONG:
        return va_arg(*args, unsigned long);
    case SIZE_SIZE_T:
        return va_arg(*args, size_t);
    default:
        return va_arg(*args, unsigned int);
    }
}

/* Parses the conversion after '%'; returns the character after it. */
static const char *parse_conversion(const char *p, struct conversion *conv,
                                    va_list *args)
{
    memset(conv, 0, sizeof(*conv));
    for (;; p++) {
        if (*p == '-')
            conv->left = 1;
        else if (*p == '0')
            conv->zero = 1;
        else
            break;
    }
    if (*p == '*') {
        conv->width = va_arg(*args, int);
        if (conv->width < 0) {
            conv->left = 1;
            conv->width = -conv->width;
        }
        p++;
    }
    while (*p >= '0' && *p <= '9')
        conv->width = conv->width * 10 + (*p++ - '0');
    if (*p == 'z') {
        conv->size = SIZE_SIZE_T;
        p++;
    }
    while (*p == 'l' && conv->size < SIZE_LONG_LONG) {
        conv->size++;
        p++;
    }
    conv->letter = *p;
    return *p ? p + 1 : p;
}

static int put_conversion(const struct conversion *conv, va_list *args)
{
    struct conversion text = *conv;     /* '0' pads numbers only */
    long long value;
    char c;
    const char *s;

    text.zero = 0;

    switch (conv->letter) {
    case 'd':
    case 'i':
        value = signed_argument(conv, args);
        return put_number(conv, value < 0 ? 0ull - (unsigned long long)value
                                          : (unsigned long long)value,
                          value < 0);
    case 'u':
    case 'x':
    case 'X':
        return put_number(conv, unsigned_argument(conv, args), 0);
    case 'p':
        return put_number(conv, (uintptr_t)va_arg(*args, void *), 0);
    case 'c':
        c = (char)va_arg(*args, int);
        return put_field(&text, "", &c, 1);
    case 's':
        s = va_arg(*args, const char *);
        if (!s)
            s = "(null)";
        return put_field(&text, "", s, strlen(s));
    case '%':
        cop_putchar('%');
        return 1;
    default:
        /* Unknown or truncated conversion: print it as written. */
        cop_putchar('%');
        if (conv->letter)
            cop_putchar(conv->letter);
        return conv->letter ? 2 : 1;
    }
}

int cop_vprintf(const char *format, va_list args)
{
    struct conversion conv;
    va_list ap;
    int n = 0;

    va_copy(ap, args);
    for (const char *p = format; *p;) {
        if (*p != '%') {
            cop_putchar(*p++);
            n++;
            continue;
        }
        p = parse_conversion(p + 1, &conv, &ap);
        n += put_conversion(&conv, &ap);
    }
    va_end(ap);
    return n;
}

int cop_printf(const char *format, ...)
{
    va_list args;
    int n;

    va_start(args, format);
    n = cop_vprintf(format, args);
    va_end(args);
    return n;
}
